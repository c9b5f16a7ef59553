#!/usr/bin/env python
# Fit a classifier from records a helper process streams through a pipe. The helper replays a pre-tokenized
# cache, far faster than we train: the pipe is nearly always full.
import json
import subprocess
import sys
import time

import torch

DIM = 1024


def main():
    feeder = subprocess.Popen([sys.executable, "replay_cache.py"], stdout=subprocess.PIPE, text=True)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(DIM, 256), torch.nn.ReLU(), torch.nn.Linear(256, 4))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    buf, n, t0 = [], 0, time.time()
    for line in feeder.stdout:
        buf.append(json.loads(line))
        if len(buf) < 32:
            continue
        x = torch.zeros(32, DIM)
        for i, r in enumerate(buf):
            x[i, r["ids"]] = 1.0
        y = torch.tensor([r["label"] for r in buf])
        for _ in range(4):  # a few passes over each batch
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        buf, n = [], n + 1
        if n % 20 == 0:
            print(f"batches {n} at {n / (time.time() - t0):.1f}/s", flush=True)


if __name__ == "__main__":
    main()
