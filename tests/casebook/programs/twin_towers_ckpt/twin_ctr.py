"""A/B run of two click-through towers, side by side in one process: the baseline, and the same tower with its
blocks under (non-reentrant) activation checkpointing, which we want for the long-history variant. Each tower
trains in its own thread with its own AdamW; both must reach the same loss.

Features are hashed into N_BUCKETS buckets (bag of hashed event ids); bucket 0 is reserved for padding at serving
time, so the hasher never emits it.
"""
import threading
import time

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

N_BUCKETS = 1024
WIDTH = 128


class ResidualMLP(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)

    def forward(self, x):
        return x + self.down(torch.relu(self.up(self.norm(x))))


class Tower(nn.Module):
    def __init__(self, recompute=False):
        super().__init__()
        self.embed = nn.Linear(N_BUCKETS, WIDTH)
        self.blocks = nn.ModuleList(ResidualMLP(WIDTH) for _ in range(3))
        self.out = nn.Linear(WIDTH, 1)
        self.recompute = recompute

    def forward(self, feats):
        h = self.embed(feats)
        for blk in self.blocks:
            h = checkpoint(blk, h, use_reentrant=False) if self.recompute else blk(h)
        return self.out(h).squeeze(-1)


def hashed_bucket(event_ids):
    return event_ids % (N_BUCKETS - 1) + 1  # 0 is the padding bucket


def event_batches(seed, batch=64, events_per_row=24):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(N_BUCKETS, generator=g)
    while True:
        events = torch.randint(0, 10_000_000, (batch, events_per_row), generator=g)
        x = torch.zeros(batch, N_BUCKETS)
        x.scatter_add_(1, hashed_bucket(events), torch.ones(batch, events_per_row))
        yield x, (x @ w > 0).float()


def run_arm(name, recompute, log, stop):
    torch.manual_seed(1234)  # same init in both arms: the A/B compares checkpointing only
    tower = Tower(recompute)
    opt = torch.optim.AdamW(tower.parameters(), lr=1e-3, weight_decay=0.0)
    bce = nn.BCEWithLogitsLoss()
    for step, (x, y) in enumerate(event_batches(7), start=1):
        if stop.is_set():
            return
        loss = bce(tower(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        log[name] = (step, loss.item())
        time.sleep(0.004)


def main():
    torch.set_num_threads(1)
    log, stop = {}, threading.Event()
    arms = [threading.Thread(target=run_arm, args=(n, r, log, stop), name=f"arm-{n}", daemon=True)
            for n, r in (("baseline", False), ("recompute", True))]
    for t in arms:
        t.start()
    t0 = time.time()
    while True:
        time.sleep(2.0)
        row = "  ".join(f"{n}: step {s} loss {v:.3f}" for n, (s, v) in sorted(log.items()))
        print(f"[{time.time() - t0:5.1f}s] {row}", flush=True)


if __name__ == "__main__":
    main()
