#!/usr/bin/env python3
"""Classifier training with a background prefetch thread (the loader is faster than the model, by design)."""
import argparse
import queue
import threading

import torch
import torch.nn as nn


class Prefetcher(threading.Thread):
    def __init__(self, depth=8, device="cpu"):
        super().__init__(name="prefetch", daemon=True)
        self.buffer = queue.Queue(maxsize=depth)
        self.device = device

    def run(self):
        g = torch.Generator().manual_seed(0)
        while True:
            x = torch.randn(128, 256, generator=g)
            y = torch.randint(0, 10, (128,), generator=g)
            self.buffer.put((x.to(self.device), y.to(self.device)))

    def __iter__(self):
        while True:
            yield self.buffer.get()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu")
    args = p.parse_args()
    loader = Prefetcher(device=args.device)
    loader.start()
    net = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)).to(args.device)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    for i, (x, y) in enumerate(loader):
        loss = nn.functional.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if i % 100 == 0:
            print("iter", i, "loss", round(loss.item(), 4), flush=True)


if __name__ == "__main__":
    main()
