"""Data-parallel fit of a small regressor: one process per rank (torchrun), gloo on CPU, each rank fed by its own
DataLoader worker process. Every rank gets the same amount of data and the same work."""

import os
import time

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, IterableDataset

STEPS = int(os.environ.get("FIT_STEPS", "100000"))


class Shard(IterableDataset):
    """Synthetic (x, y) batches for one rank; a short pause stands for reading them from disk."""

    def __init__(self, rank: int, batch: int = 64) -> None:
        self.rank, self.batch = rank, batch

    def __iter__(self):
        gen = torch.Generator().manual_seed(1000 + self.rank)
        while True:
            time.sleep(0.01)
            x = torch.randn(self.batch, 32, generator=gen)
            yield x, x.sum(dim=1, keepdim=True)


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Shard(rank), batch_size=None, num_workers=1, prefetch_factor=4)
    for step, (x, y) in enumerate(loader):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= world
        opt.step()
        time.sleep(0.03)  # the rest of a step (logging, scheduling) every rank does alike
        if rank == 0 and step % 50 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
        if step >= STEPS:
            break
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
