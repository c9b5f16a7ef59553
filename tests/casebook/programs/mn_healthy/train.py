"""Data-parallel training of a small regressor over two nodes (torchrun on each, c10d rendezvous), gloo on CPU: each
rank averages its gradients with the others by hand (one all_reduce of the flattened gradients per step)."""

import os
import time

import torch
import torch.distributed as dist

STEPS = int(os.environ.get("TRAIN_STEPS", "100000"))


def batch(gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    time.sleep(0.02)  # reading a record
    x = torch.randn(32, 16, generator=gen)
    return x, x.sum(dim=1, keepdim=True)


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(100 + rank)
    for step in range(STEPS):
        x, y = batch(gen)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        flat = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
        dist.all_reduce(flat)
        offset = 0
        for p in model.parameters():
            p.grad.copy_(flat[offset:offset + p.numel()].view_as(p) / world)
            offset += p.numel()
        opt.step()
        if step % 20 == 0:
            print(f"[rank {rank}] step {step} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
