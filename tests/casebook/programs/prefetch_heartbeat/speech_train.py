# Keyword-spotting trainer (healthy): a feature prefetcher thread fills a bounded queue faster than the model
# consumes it, so the queue stays full and the prefetcher mostly waits in put(); a heartbeat thread writes a
# liveness file every few seconds for the cluster's job monitor and sleeps in between. Patterned after the
# background-generator prefetchers of many training repos (the healthy half of pytorch/pytorch#21554's pattern).
import argparse
import os
import queue
import threading
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

N_MELS, FRAMES, N_WORDS = 40, 49, 12


class FeaturePrefetcher:
    def __init__(self, batch_size, depth=4):
        self.batch_size = batch_size
        self.slots = queue.Queue(maxsize=depth)
        self.produced = 0
        self._worker = threading.Thread(target=self._fill, name="feat-prefetch", daemon=True)

    def _fill(self):
        g = torch.Generator().manual_seed(7)
        templates = torch.randn(N_WORDS, N_MELS, FRAMES, generator=g)
        while True:
            words = torch.randint(0, N_WORDS, (self.batch_size,), generator=g)
            shift = int(torch.randint(-4, 5, (1,), generator=g))
            mels = torch.roll(templates[words], shifts=shift, dims=2)
            mels = mels + 0.7 * torch.randn(mels.shape, generator=g)
            self.slots.put((mels.unsqueeze(1), words))
            self.produced += 1

    def start(self):
        self._worker.start()
        return self

    def get(self):
        return self.slots.get()


class Heartbeat:
    def __init__(self, path, every_s=5.0):
        self.path, self.every_s = path, every_s
        self.stop = threading.Event()
        self.step = 0
        self._t = threading.Thread(target=self._beat, name="heartbeat", daemon=True)

    def _beat(self):
        while not self.stop.wait(self.every_s):
            with open(self.path, "w") as f:
                f.write(f"{time.time():.0f} step={self.step}\n")

    def start(self):
        self._t.start()
        return self


class KWSNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1, stride=2)
        self.conv3 = nn.Conv2d(32, 32, 3, padding=1, stride=2)
        self.fc = nn.Linear(32, N_WORDS)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.relu(self.conv3(x))
        return self.fc(x.mean(dim=(2, 3)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--heartbeat", default=os.path.join("runs", "heartbeat.txt"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)

    os.makedirs(os.path.dirname(args.heartbeat) or ".", exist_ok=True)
    feeder = FeaturePrefetcher(args.batch_size).start()
    beat = Heartbeat(args.heartbeat).start()
    net = KWSNet()
    opt = torch.optim.AdamW(net.parameters(), lr=args.lr)
    t0, it = time.time(), 0
    try:
        while True:
            mels, words = feeder.get()
            logits = net(mels)
            loss = F.cross_entropy(logits, words)
            opt.zero_grad()
            loss.backward()
            opt.step()
            it += 1
            beat.step = it
            if it % 20 == 0:
                acc = (logits.argmax(1) == words).float().mean().item()
                print(f"it {it:5d}  loss {loss.item():.3f}  acc {acc:.2f}  queue {feeder.slots.qsize()}/"
                      f"{feeder.slots.maxsize}  {it / (time.time() - t0):.1f} it/s", flush=True)
    finally:
        beat.stop.set()
        try:
            os.remove(args.heartbeat)
        except OSError:
            pass


if __name__ == "__main__":
    main()
