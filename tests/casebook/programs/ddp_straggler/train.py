"""Data-parallel training of a small classifier under torchrun (gloo on CPU). Each rank reads its shard through a
DataLoader worker process; rank 0 also keeps the run's metrics for the dashboard (metrics.py) after every step."""

import os
import time

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, IterableDataset

from metrics import RunMetrics

MAX_STEPS = int(os.environ.get("TRAIN_STEPS", "100000"))


class RankShard(IterableDataset):
    def __init__(self, rank: int) -> None:
        self.rank = rank

    def __iter__(self):
        gen = torch.Generator().manual_seed(7 + self.rank)
        while True:
            time.sleep(0.005)  # reading a record
            x = torch.randn(48, 24, generator=gen)
            yield x, (x[:, 0] > 0).long()


def train() -> None:
    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1)
    net = torch.nn.Sequential(torch.nn.Linear(24, 48), torch.nn.Tanh(), torch.nn.Linear(48, 2))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    metrics = RunMetrics() if rank == 0 else None
    batches = DataLoader(RankShard(rank), batch_size=None, num_workers=1, prefetch_factor=4)
    for step, (x, y) in enumerate(batches):
        logits = net(x)
        loss = torch.nn.functional.cross_entropy(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        flat = torch.cat([p.grad.reshape(-1) for p in net.parameters()])
        dist.all_reduce(flat)
        flat /= world
        offset = 0
        for p in net.parameters():
            p.grad.copy_(flat[offset:offset + p.numel()].view_as(p))
            offset += p.numel()
        opt.step()
        time.sleep(0.02)
        if metrics is not None:
            metrics.update(step, loss.item(), logits.detach())
        if rank == 0 and step % 20 == 0:
            print(f"step {step} loss {loss.item():.3f}", flush=True)
        if step >= MAX_STEPS:
            break
    dist.destroy_process_group()


if __name__ == "__main__":
    train()
