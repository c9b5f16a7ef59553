"""Data-parallel sequence model (torchrun, gloo on CPU): every rank reads its shard of tokenised documents through a
DataLoader worker process and pads each batch to its longest document. Shards were cut by document count; rank 1's
shard holds the long documents."""

import time

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, IterableDataset

from model import TinyEncoder


class DocumentShard(IterableDataset):
    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.max_len = 512 if rank == 1 else 128  # the long documents all landed on shard 1

    def __iter__(self):
        gen = torch.Generator().manual_seed(self.rank)
        while True:
            time.sleep(0.005)
            yield torch.randint(0, 1000, (8, self.max_len), generator=gen)


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = TinyEncoder()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step, tokens in enumerate(DataLoader(DocumentShard(rank), batch_size=None, num_workers=1)):
        loss = model(tokens).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():
            if p.grad is not None:
                dist.all_reduce(p.grad)
                p.grad /= world
        opt.step()
        time.sleep(0.02)
        if rank == 0 and step % 10 == 0:
            print(f"step {step}", flush=True)


if __name__ == "__main__":
    main()
