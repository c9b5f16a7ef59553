import argparse
import sys
import time

import torch
import torch.nn as nn

import station
from archive import EVENT_KINDS, WaveformArchive
from reader import start_readers


class EventNet(nn.Module):
    def __init__(self, channels, classes):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv1d(channels, 16, 9, stride=4, padding=4), nn.ReLU(),
            nn.Conv1d(16, 32, 7, stride=2, padding=3), nn.ReLU(),
            nn.Conv1d(32, 48, 5, stride=2, padding=2), nn.ReLU(),
            nn.AdaptiveAvgPool1d(8),
        )
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(48 * 8, 64), nn.ReLU(), nn.Linear(64, classes))

    def forward(self, x):
        return self.head(self.features(x))


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/observatory_lab.toml")
    args = ap.parse_args(argv)
    prof = station.load(args.config)
    torch.set_num_threads(prof.train.threads)
    torch.manual_seed(prof.train.seed)

    archive = WaveformArchive(prof.archive)
    model = EventNet(3 * prof.archive.channels, len(EVENT_KINDS))
    opt = torch.optim.Adam(model.parameters(), lr=prof.train.lr)
    loss_fn = nn.CrossEntropyLoss()
    batches, readers = start_readers(archive, prof.reader, prof.train.seed + 1)
    print(f"profile {prof.name}: {archive.count} windows staged", flush=True)

    step = 0
    t_last = time.perf_counter()
    while True:
        x, y = batches.get()
        logits = model(x)
        loss = loss_fn(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        if step % prof.train.report_every == 0:
            now = time.perf_counter()
            acc = (logits.argmax(1) == y).float().mean().item()
            print(f"step {step} loss {loss.item():.4f} acc {acc:.3f} dt {1000 * (now - t_last):.1f}ms", flush=True)
            t_last = now


if __name__ == "__main__":
    sys.exit(main())
