"""Data-parallel-ready trainer: it always joins a process group (world size 1 when started without torchrun; gloo,
"because NCCL hung on the old cluster") and averages gradients by hand with all_reduce. Gradient accumulation
over 8 micro-batches; the training loop runs on a worker thread, a sampler thread feeds it.

Modelled on karpathy/nanochat#33 ("Skip sync across GPUs for all but last gradient accumulation step"),
NVIDIA/cosmos-framework#161 ("grad_accum_iter saves no communication": every micro-step ran the full gradient
reduction) and pytorch/pytorch#170239 (ProcessGroupGloo on CUDA tensors copies them to pinned host memory, reduces
on the CPU and copies back, synchronising on the copy): here every parameter's gradient is all-reduced after
every micro-batch, one gloo call per tensor, so each micro-step waits for the GPU 29 times.

  python dp_train.py                        # all_reduce per tensor after each micro-batch (as written)
  python dp_train.py --reduce-at-boundary   # one bucketed all_reduce per optimizer step
"""
import argparse
import os
import queue
import threading
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn


def build(width, depth, vocab):
    layers = [nn.Embedding(vocab, width)]
    for _ in range(depth):
        layers += [nn.LayerNorm(width), nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width)]
    layers += [nn.LayerNorm(width), nn.Linear(width, vocab)]
    return nn.Sequential(*layers)


def average_each(params, world):
    for p in params:
        if p.grad is not None:
            dist.all_reduce(p.grad)
            p.grad.div_(world)


def average_bucketed(params, world):
    grads = [p.grad for p in params if p.grad is not None]
    flat = torch.cat([g.flatten() for g in grads])
    dist.all_reduce(flat)
    flat.div_(world)
    offset = 0
    for g in grads:
        g.copy_(flat[offset:offset + g.numel()].view_as(g))
        offset += g.numel()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--reduce-at-boundary", action="store_true")
    args = ap.parse_args()
    device = torch.device(args.device)
    gpu = device.type == "cuda"
    if "RANK" not in os.environ:  # a plain `python dp_train.py`: a group of one
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    else:
        dist.init_process_group("gloo")
    world = dist.get_world_size()
    dist.barrier()
    width, depth, vocab, micro, seq, accum = (512, 4, 8192, 64, 512, 8) if gpu else (64, 2, 500, 2, 32, 8)
    model = build(width, depth, vocab).to(device)
    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=1e-4)
    batches = queue.Queue(maxsize=2 * accum)

    def sample():
        g = torch.Generator(device=device).manual_seed(dist.get_rank())
        while True:
            batches.put(torch.randint(0, vocab, (micro, seq + 1), device=device, generator=g))

    def train():
        step, t0 = 0, time.time()
        while True:
            for _ in range(accum):
                ids = batches.get()
                with torch.autocast(device.type, dtype=torch.bfloat16, enabled=gpu):
                    logits = model(ids[:, :-1])
                loss = F.cross_entropy(logits.float().flatten(0, 1), ids[:, 1:].flatten()) / accum
                loss.backward()
                if not args.reduce_at_boundary:
                    average_each(params, world)
            if args.reduce_at_boundary:
                average_bucketed(params, world)
            opt.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            if step % 5 == 0:
                print(f"rank {dist.get_rank()} step {step} loss {loss.item() * accum:.3f} "
                      f"{5 / (time.time() - t0):.2f} step/s", flush=True)
                t0 = time.time()

    threading.Thread(target=sample, name="sampler", daemon=True).start()
    worker = threading.Thread(target=train, name="dp-worker")
    worker.start()
    worker.join()


if __name__ == "__main__":
    main()
