"""One rank of bench/nccl_ranks.py's job (started by torchrun): GPU work and a gradient all_reduce per step.

--phase straggler: rank 1 does three times rank 0's work per step, and 40 ms of host-side work (an augmentation in
Python: the same on any machine, where the extra GPU work on a GPU both ranks share slows both). --phase hang: after
20 steps rank 0 calls a barrier that rank 1 never enters (it goes on to its next all_reduce). Both ranks use --device
(cuda: cuda:0).

--backend mixed: gloo for the job's collectives (the gradient is all-reduced on the host), and a one-rank NCCL group
of rank 0 that all-reduces a metric on the GPU every step: one NCCL rank beside gloo ranks on a one-GPU machine,
so its NCCL Flight Recorder has entries (two NCCL ranks on one device are refused).
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
    mixed = args.backend == "mixed"
    dist.init_process_group("gloo" if mixed else args.backend)
    rank = dist.get_rank()
    # Every rank takes part in creating a group, members or not; only rank 0 is in this one.
    nccl_group = dist.new_group([0], backend="nccl") if mixed else None
    metric = torch.zeros(4, device=device)
    n = 2048 if device.type == "cuda" else 256
    a = torch.randn(n, n, device=device)
    grad = torch.zeros(n, device=device)
    repeats = 3 if (args.phase == "straggler" and rank == 1) else 1
    step = 0
    while True:
        for _ in range(8 * repeats):
            a = torch.tanh(a @ a / n)
        grad += a.sum(dim=0)
        if mixed:
            host = grad.cpu()  # the gloo all_reduce takes host tensors: the copy waits for the step's kernels
            dist.all_reduce(host)
            if rank == 0:
                metric += a[0, :4]
                dist.all_reduce(metric, group=nccl_group)
        else:
            dist.all_reduce(grad)
        grad.zero_()
        if args.phase == "straggler" and rank == 1:
            _augment_on_host(0.04)
        loss = float(a.mean().item())  # the host waits for the step here, as a training loop's logging does
        step += 1
        if step % 10 == 0:
            print(f"rank {rank} step {step} loss {loss:.4f}", flush=True)
        if args.phase == "hang" and step == 20 and rank == 0:
            print("rank 0 enters the barrier", flush=True)
            dist.barrier()
        time.sleep(0.01)


def _augment_on_host(seconds: float) -> None:
    """Host-side work in Python for a fixed time: a straggler on any machine, fast or slow."""
    end = time.perf_counter() + seconds
    x = 0
    while time.perf_counter() < end:
        x = (x * 31 + 7) % 1000003


if __name__ == "__main__":
    main()
