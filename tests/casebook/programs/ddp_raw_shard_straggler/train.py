"""Data-parallel sentiment classifier, launched with torchrun on CPU (gloo):

    torchrun --nproc-per-node 3 train.py

Gradients are averaged by hand with one all_reduce of a flat buffer per step (the PyTorch distributed
tutorial's ``average_gradients``, coalesced).
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from shards import VOCAB, Shard


class BagClassifier(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.emb = nn.EmbeddingBag(VOCAB, dim, mode="mean")
        self.ff = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, 2))

    def forward(self, ids):
        return self.ff(self.emb(ids))


def average_gradients(model, world):
    grads = [p.grad for p in model.parameters()]
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    flat /= world
    offset = 0
    for g in grads:
        g.copy_(flat[offset:offset + g.numel()].view_as(g))
        offset += g.numel()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--log-every", type=int, default=20)
    args = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # same init on every rank
    model = BagClassifier()
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    shard = Shard(rank, args.batch_size)
    print(f"[rank {rank}] pid {os.getpid()} world {world} shard {'raw text' if shard.raw else 'tensor cache'}",
          flush=True)

    data_s = comm_s = 0.0
    t_log = time.perf_counter()
    batches = iter(shard)
    step = 0
    while True:
        t0 = time.perf_counter()
        ids, labels = next(batches)
        t1 = time.perf_counter()
        loss = F.cross_entropy(model(ids), labels)
        opt.zero_grad()
        loss.backward()
        t2 = time.perf_counter()
        average_gradients(model, world)
        t3 = time.perf_counter()
        opt.step()
        data_s += t1 - t0
        comm_s += t3 - t2
        step += 1
        if step % args.log_every == 0:
            span = time.perf_counter() - t_log
            print(f"[rank {rank}] step {step} loss {loss.item():.3f} data {1000 * data_s / args.log_every:.1f} ms/step "
                  f"all_reduce {1000 * comm_s / args.log_every:.1f} ms/step ({args.log_every / span:.1f} steps/s)",
                  flush=True)
            data_s = comm_s = 0.0
            t_log = time.perf_counter()


if __name__ == "__main__":
    main()
