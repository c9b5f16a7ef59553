"""One rank of bench/nccl_ranks.py's job (started by torchrun): GPU work and a gradient all_reduce per step.

--phase straggler: rank 1 does three times rank 0's work per step. --phase hang: after 20 steps rank 0 calls a
barrier that rank 1 never enters (it goes on to its next all_reduce). Both ranks use --device (cuda: cuda:0).
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.distributed as dist


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", required=True)
    parser.add_argument("--phase", choices=("straggler", "hang"), required=True)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    device = torch.device("cuda:0" if args.device == "cuda" else "cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(args.backend)
    rank = dist.get_rank()
    n = 2048 if device.type == "cuda" else 256
    a = torch.randn(n, n, device=device)
    grad = torch.zeros(n, device=device)
    repeats = 3 if (args.phase == "straggler" and rank == 1) else 1
    step = 0
    while True:
        for _ in range(8 * repeats):
            a = torch.tanh(a @ a / n)
        grad += a.sum(dim=0)
        dist.all_reduce(grad)
        grad.zero_()
        loss = float(a.mean().item())  # the host waits for the step here, as a training loop's logging does
        step += 1
        if step % 10 == 0:
            print(f"rank {rank} step {step} loss {loss:.4f}", flush=True)
        if args.phase == "hang" and step == 20 and rank == 0:
            print("rank 0 enters the barrier", flush=True)
            dist.barrier()
        time.sleep(0.01)


if __name__ == "__main__":
    main()
