"""Elastic fine-tuning under torchrun --max-restarts (gloo on CPU): each rank reads its own list of records through
a DataLoader worker; a record that does not decode raises in that rank, and torchrun restarts the whole group."""

import os
import time

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset


class Records(Dataset):
    """Rank r's records; rank 1's list holds a record that does not decode (a truncated row)."""

    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.rows = [f"{i},{(i * 7) % 13}" for i in range(400)]
        if rank == 1:
            self.rows[120] = "120,"

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int):
        time.sleep(0.002)
        a, b = self.rows[i].split(",")
        return torch.tensor([float(a) / 400.0, float(b) / 13.0])


def main() -> None:
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        print(f"attempt {attempt}: {world} ranks up", flush=True)
    model = torch.nn.Linear(1, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = DataLoader(Records(rank), batch_size=8, num_workers=1)
    for step, batch in enumerate(loader):
        loss = torch.nn.functional.mse_loss(model(batch[:, :1]), batch[:, 1:])
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= world
        opt.step()
        time.sleep(0.04)
        if rank == 0 and step % 5 == 0:
            print(f"attempt {attempt} step {step}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
