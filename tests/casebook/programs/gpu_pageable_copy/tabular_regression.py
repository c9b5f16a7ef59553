"""Tabular regression on a feature shard held in host RAM: a loader thread slices mini-batches from the shard,
the training thread copies each to the GPU with non_blocking=True and trains an MLP.

Modelled on hao-ai-lab/FastVideo#1217 (nsys flagged "Pageable Memory Transfers: tensor.to(device) ... blocked the
CPU thread until the PCIe DMA transfer completed"; 45% GPU idle) and pytorch/pytorch#42539 (non_blocking only
has an effect when the source is in pinned memory; the docs did not say so): the shard is ordinary pageable
memory, so each "non-blocking" copy first waits for the GPU to finish the queued step, then stages the batch
through a driver buffer while the GPU idles.

  python tabular_regression.py            # pageable shard (as written)
  python tabular_regression.py --pinned   # the shard pinned once at start-up, copies prefetched on a side stream
"""
import argparse
import queue
import threading
import time

import torch
from torch import nn


class ShardLoader(threading.Thread):
    def __init__(self, features, targets, batch_size, out):
        super().__init__(name="shard-loader", daemon=True)
        self.features, self.targets, self.batch_size, self.out = features, targets, batch_size, out

    def run(self):
        n = self.features.shape[0] // self.batch_size
        i = 0
        while True:
            lo = (i % n) * self.batch_size
            self.out.put((self.features[lo:lo + self.batch_size], self.targets[lo:lo + self.batch_size]))
            i += 1


class Prefetcher:
    """Copies the next batch on a side stream while the current one trains (NVIDIA's data_prefetcher recipe)."""

    def __init__(self, source, device):
        self.source, self.device = source, device
        self.stream = torch.cuda.Stream(device)
        self.next = None

    def _load(self):
        x, y = self.source.get()
        with torch.cuda.stream(self.stream):
            self.next = (x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True))

    def get(self):
        if self.next is None:
            self._load()
        torch.cuda.current_stream(self.device).wait_stream(self.stream)
        x, y = self.next
        x.record_stream(torch.cuda.current_stream(self.device))
        y.record_stream(torch.cuda.current_stream(self.device))
        self._load()
        return x, y


def build_model(width, depth, device):
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.SiLU()]
    return nn.Sequential(*layers, nn.Linear(width, 1)).to(device)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--pinned", action="store_true")
    args = ap.parse_args()
    device = torch.device(args.device)
    gpu = device.type == "cuda"
    rows, width, batch_size, depth = (32768, 4096, 4096, 6) if gpu else (4096, 256, 256, 3)

    torch.manual_seed(0)
    features = torch.randn(rows, width)
    targets = features[:, :8].sum(1, keepdim=True) + 0.1 * torch.randn(rows, 1)
    if args.pinned and gpu:
        features, targets = features.pin_memory(), targets.pin_memory()
    print(f"shard {rows}x{width} fp32 ({features.numel() * 4 / 2**20:.0f} MiB), pinned={features.is_pinned()}",
          flush=True)

    batches = queue.Queue(maxsize=4)
    ShardLoader(features, targets, batch_size, batches).start()
    prefetch = Prefetcher(batches, device) if args.pinned and gpu else None
    model = build_model(width, depth, device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def train():
        step, t0 = 0, time.time()
        while True:
            if prefetch is not None:
                x, y = prefetch.get()
            else:
                x_cpu, y_cpu = batches.get()
                x = x_cpu.to(device, non_blocking=True)
                y = y_cpu.to(device, non_blocking=True)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=gpu):
                pred = model(x)
            loss = nn.functional.mse_loss(pred.float(), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            if step % 25 == 0:
                dt = time.time() - t0
                print(f"step {step:5d}  mse {loss.item():.4f}  {25 * batch_size / dt:,.0f} rows/s", flush=True)
                t0 = time.time()

    worker = threading.Thread(target=train, name="train-loop")
    worker.start()
    worker.join()


if __name__ == "__main__":
    main()
