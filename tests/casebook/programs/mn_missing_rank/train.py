"""Data-parallel training over two nodes, gloo on CPU. Every 25 steps each rank hands a checkpoint of its model to
an uploader thread and waits for the upload's acknowledgement before it goes on. On rank 3 the uploader thread
died on its first upload (its credentials expired): rank 3 waits for an acknowledgement that never comes and never
enters the next all_reduce, while every other rank waits in it."""

import os
import queue
import threading
import time

import torch
import torch.distributed as dist

STEPS = int(os.environ.get("TRAIN_STEPS", "100000"))
STUCK_RANK = int(os.environ.get("STUCK_RANK", "3"))
CKPT_EVERY = 25


class Uploader:
    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.jobs: queue.Queue = queue.Queue()
        self.acks: queue.Queue = queue.Queue()
        threading.Thread(target=self.run, name="ckpt-uploader", daemon=True).start()

    def run(self) -> None:
        while True:
            state = self.jobs.get()
            if self.rank == STUCK_RANK:
                raise PermissionError("upload refused: credentials expired")
            time.sleep(0.01 * len(state))  # the upload
            self.acks.put(True)

    def save(self, model: torch.nn.Module) -> None:
        self.jobs.put({k: v.clone() for k, v in model.state_dict().items()})
        self.acks.get()  # the checkpoint is safe: go on


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    uploader = Uploader(rank)
    gen = torch.Generator().manual_seed(100 + rank)
    for step in range(STEPS):
        time.sleep(0.02)
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
        if step > 0 and step % CKPT_EVERY == 0:
            uploader.save(model)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
