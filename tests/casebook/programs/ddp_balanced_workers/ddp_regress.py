#!/usr/bin/env python
"""Healthy data-parallel run: DistributedDataParallel (gloo, CPU) over 2 ranks, each fed by a DataLoader with
one persistent worker process; the shards are the same size and the per-sample work is the same on every rank.

    torchrun --nproc-per-node 2 ddp_regress.py

The shape of the PyTorch DDP tutorial plus a DistributedSampler-fed DataLoader (see pytorch/pytorch#64150 asking
for exactly this example).
"""
import argparse
import math
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import BatchSampler, DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class WaveDataset(Dataset):
    """Sample i: 16 noisy readings of a damped wave and the wave's next value. The clean waves are computed once
    (the same on every rank); the reading noise is drawn per access in the loader worker."""

    def __init__(self, n=20000, seed=0):
        g = torch.Generator().manual_seed(seed)
        freq = 0.2 + torch.rand(n, 1, generator=g) * 0.6
        damp = torch.rand(n, 1, generator=g) * 0.05
        t = torch.arange(17, dtype=torch.float32)
        self.waves = torch.exp(-damp * t) * torch.sin(freq * t)

    def __len__(self):
        return len(self.waves)

    def __getitem__(self, idx):
        # idx is a list of indices: the loader is given a BatchSampler, so each fetch builds a whole batch
        waves = self.waves[idx]
        return waves[:, :16] + 0.05 * torch.randn(len(idx), 16), waves[:, 16:]


def worker_init(_):
    torch.set_num_threads(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=1000)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    args = ap.parse_args()

    torch.set_num_threads(1)
    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))

    dataset = WaveDataset()
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, drop_last=True)
    batches = BatchSampler(sampler, batch_size=args.batch_size, drop_last=True)
    loader = DataLoader(dataset, sampler=batches, batch_size=None, num_workers=1,
                        persistent_workers=True, prefetch_factor=8, worker_init_fn=worker_init)

    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(16, 512), nn.Tanh(), nn.Linear(512, 512), nn.Tanh(), nn.Linear(512, 1)))
    optim = torch.optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = nn.MSELoss()

    if rank == 0:
        print(f"world={world} batches/epoch/rank={len(loader)}", flush=True)
    global_step = 0
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        t0, running = time.time(), 0.0
        for x, y in loader:
            optim.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optim.step()
            running += loss.item()
            global_step += 1
            if global_step % 50 == 0:
                print(f"rank={rank} local_rank={local_rank} epoch={epoch} step={global_step} "
                      f"mse={running / 50:.5f} ({50 / (time.time() - t0):.1f} it/s)", flush=True)
                t0, running = time.time(), 0.0
        if not math.isfinite(running):
            break
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
