"""Data-parallel training over two nodes, gloo on CPU, where rank 3 runs a different configuration from step 20 on
(MISMATCH picks how, as a stale config file on its node would):

- ``size``: its model froze the last layer, so its flattened gradient is shorter than the others';
- ``dtype``: it keeps its gradients in float64;
- ``op``: it synchronises its weights with a broadcast from rank 0 where the others average gradients.

The other ranks cannot tell: they call the same all_reduce as before, and the job's collectives pair wrongly."""

import os
import time

import torch
import torch.distributed as dist

STEPS = int(os.environ.get("TRAIN_STEPS", "100000"))
ODD_RANK = int(os.environ.get("ODD_RANK", "3"))
MISMATCH = os.environ.get("MISMATCH", "size")
FROM_STEP = 20


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(100 + rank)
    for step in range(STEPS):
        time.sleep(0.02)
        x = torch.randn(32, 16, generator=gen)
        loss = torch.nn.functional.mse_loss(model(x), x.sum(dim=1, keepdim=True))
        opt.zero_grad()
        loss.backward()
        odd = rank == ODD_RANK and step >= FROM_STEP
        params = list(model.parameters())[:2] if odd and MISMATCH == "size" else list(model.parameters())
        flat = torch.cat([p.grad.reshape(-1) for p in params])
        if odd and MISMATCH == "dtype":
            flat = flat.double()
        if odd and MISMATCH == "op":
            dist.broadcast(flat, src=0)
        else:
            dist.all_reduce(flat)
        offset = 0
        for p in params:
            p.grad.copy_(flat[offset:offset + p.numel()].view_as(p).float() / world)
            offset += p.numel()
        opt.step()
        if step % 10 == 0:
            print(f"[rank {rank}] step {step} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
