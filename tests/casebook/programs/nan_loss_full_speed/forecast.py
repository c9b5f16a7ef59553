"""Demand forecasting: an MLP predicts log(sales) from the last 28 days; shards are read by two loader threads.

The second shard has stores that were closed on some days (sales 0).
"""
import queue
import threading
import time

import torch
from torch import nn

WINDOW = 28
batches = queue.Queue(maxsize=6)


def shard_reader(shard_id: int, closed_days: bool):
    g = torch.Generator().manual_seed(shard_id)
    while True:
        level = torch.rand(32, 1, generator=g) * 50 + 5
        hist = level * (1 + 0.2 * torch.randn(32, WINDOW + 1, generator=g)).clamp(min=0.05)
        if closed_days:
            hist[torch.rand(hist.shape, generator=g) < 0.05] = 0.0
        batches.put((hist[:, :WINDOW], hist[:, WINDOW:]))
        time.sleep(0.02)


class Forecaster(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(WINDOW, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, hist):
        return self.net(torch.log(hist))  # log-sales in, log-sales out


def main():
    torch.set_num_threads(1)
    model = Forecaster()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    threading.Thread(target=shard_reader, args=(1, False), name="shard-1", daemon=True).start()
    started_second = False
    step = 0
    while True:
        if step == 40 and not started_second:
            threading.Thread(target=shard_reader, args=(2, True), name="shard-2", daemon=True).start()
            started_second = True
        hist, target = batches.get()
        pred = model(hist)
        loss = nn.functional.mse_loss(pred, torch.log(target))
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if step % 20 == 0:
            value = loss.item()
            print(f"step={step} mse_log={value:.4f}", flush=True)


if __name__ == "__main__":
    main()
