"""Data-parallel training where each rank trains on a background thread and the main thread reports progress
(torchrun, gloo on CPU). Batches come from a DataLoader worker process per rank. Rank 2's shard has a batch of the
wrong width: its training thread raises, and the main thread keeps waiting for it."""

import threading
import time

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, IterableDataset


class Shard(IterableDataset):
    def __init__(self, rank: int) -> None:
        self.rank = rank

    def __iter__(self):
        gen = torch.Generator().manual_seed(self.rank)
        n = 0
        while True:
            time.sleep(0.01)
            n += 1
            width = 15 if (self.rank == 2 and n == 40) else 16  # a row written by an older exporter
            yield torch.randn(32, width, generator=gen)


class Trainer:
    def __init__(self, rank: int, world: int) -> None:
        self.rank, self.world = rank, world
        self.model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16))
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01)
        self.steps = 0

    def run(self) -> None:
        for x in DataLoader(Shard(self.rank), batch_size=None, num_workers=1):
            loss = (self.model(x) - x).pow(2).mean()
            self.opt.zero_grad()
            loss.backward()
            for p in self.model.parameters():
                dist.all_reduce(p.grad)
                p.grad /= self.world
            self.opt.step()
            self.steps += 1
            time.sleep(0.03)


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    trainer = Trainer(rank, world)
    thread = threading.Thread(target=trainer.run, name="trainer", daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(timeout=2.0)
        if rank == 0:
            print(f"progress: {trainer.steps} steps", flush=True)
    print(f"rank {rank}: trainer stopped after {trainer.steps} steps", flush=True)
    while True:  # keep serving the job's status endpoint until the scheduler stops us
        time.sleep(1.0)


if __name__ == "__main__":
    main()
