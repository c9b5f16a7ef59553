"""Data-parallel training over two nodes, gloo on CPU. Rank 3's host runs out of memory at step 40 and the kernel
kills it (SIGKILL: no Python exception, no exit handler). The other ranks wait for it in the next all_reduce."""

import os
import signal
import time

import torch
import torch.distributed as dist

STEPS = int(os.environ.get("TRAIN_STEPS", "100000"))
DEAD_RANK = int(os.environ.get("DEAD_RANK", "3"))
DIE_AT_STEP = int(os.environ.get("DIE_AT_STEP", "40"))


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(100 + rank)
    for step in range(STEPS):
        time.sleep(0.02)
        if rank == DEAD_RANK and step == DIE_AT_STEP:
            os.kill(os.getpid(), signal.SIGKILL)  # the OOM killer
        x = torch.randn(32, 16, generator=gen)
        loss = torch.nn.functional.mse_loss(model(x), x.sum(dim=1, keepdim=True))
        opt.zero_grad()
        loss.backward()
        flat = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
        dist.all_reduce(flat)
        offset = 0
        for p in model.parameters():
            p.grad.copy_(flat[offset:offset + p.numel()].view_as(p) / world)
            offset += p.numel()
        opt.step()
        if step % 10 == 0:
            print(f"[rank {rank}] step {step} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
