"""Data-parallel pretraining loop (torchrun, gloo on CPU) with a DataLoader worker per rank and a checkpoint every
SAVE_EVERY steps. Only rank 0 writes checkpoints (ckpt.save is called under `if rank == 0`)."""

import os
import tempfile
import time

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, IterableDataset

import ckpt

SAVE_EVERY = 30


class Tokens(IterableDataset):
    def __init__(self, rank: int) -> None:
        self.rank = rank

    def __iter__(self):
        gen = torch.Generator().manual_seed(self.rank)
        while True:
            time.sleep(0.01)
            yield torch.randint(0, 512, (16, 32), generator=gen)


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    emb = torch.nn.EmbeddingBag(512, 32)
    head = torch.nn.Linear(32, 512)
    params = list(emb.parameters()) + list(head.parameters())
    opt = torch.optim.SGD(params, lr=0.1)
    out_dir = tempfile.mkdtemp(prefix=f"pretrain-{rank}-")
    for step, tokens in enumerate(DataLoader(Tokens(rank), batch_size=None, num_workers=1)):
        logits = head(emb(tokens[:, :-1]))
        loss = torch.nn.functional.cross_entropy(logits, tokens[:, -1])
        opt.zero_grad()
        loss.backward()
        for p in params:
            dist.all_reduce(p.grad)
            p.grad /= world
        opt.step()
        time.sleep(0.02)
        if rank == 0 and step % 10 == 0:
            print(f"step {step} loss {loss.item():.3f}", flush=True)
        if step > 0 and step % SAVE_EVERY == 0 and rank == 0:
            print(f"saving step {step}", flush=True)
            ckpt.save({"emb": emb.state_dict(), "head": head.state_dict(), "step": step}, out_dir)


if __name__ == "__main__":
    main()
