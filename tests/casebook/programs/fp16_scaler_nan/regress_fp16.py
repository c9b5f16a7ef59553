"""Mixed-precision (fp16 autocast + GradScaler) regression on sensor features, standardised per column.

One sensor column is constant in this export, so its standard deviation is 0.
"""
import threading
import queue
import time

import torch
from torch import nn

N_SENSORS = 16
torch.set_num_threads(1)


def reader(out: "queue.Queue[tuple[torch.Tensor, torch.Tensor]]") -> None:
    g = torch.Generator().manual_seed(3)
    while True:
        x = torch.randn(64, N_SENSORS, generator=g)
        x[:, 7] = 1.25  # a stuck sensor
        y = x[:, :3].sum(-1, keepdim=True)
        out.put((x, y))
        time.sleep(0.008)


def standardise(x: torch.Tensor) -> torch.Tensor:
    return (x - x.mean(0)) / x.std(0)


class Regressor(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(N_SENSORS, 96), nn.SiLU(), nn.Linear(96, 96), nn.SiLU(), nn.Linear(96, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def main() -> None:
    batches: "queue.Queue[tuple[torch.Tensor, torch.Tensor]]" = queue.Queue(maxsize=4)
    threading.Thread(target=reader, args=(batches,), name="sensor-reader", daemon=True).start()
    model = Regressor()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu")
    it = 0
    while True:
        x, y = batches.get()
        with torch.autocast("cpu", dtype=torch.float16):
            loss = nn.functional.mse_loss(model(standardise(x)).float(), y)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        it += 1
        if it % 25 == 0:
            print(f"it={it} mse={loss.item():.4f} scale={scaler.get_scale():.3g}", flush=True)


if __name__ == "__main__":
    main()
