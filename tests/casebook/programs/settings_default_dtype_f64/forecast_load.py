"""Short-term electricity load forecaster with calibrated uncertainty (uqkit's GP calibrator on top of an MLP).

Modelled on cics-nd/gptorch#22 ("Importing gptorch changes PyTorch's default dtype from float32 to float64"),
rballester/tntorch#4 (`torch.set_default_dtype(torch.float64)` "called upon importing tntorch ... knock on effects
when incorporating tntorch into existing torch projects") and gensyn-ai/rl-swarm#188 (a global float64 default
"leads to increased memory usage and potentially slower computations"). Here `import uqkit` switches the process to
float64: every tensor the window-sampler thread creates and every parameter of the forecaster is double precision,
and each matmul of the training thread takes about twice as long as in float32.

    python forecast_load.py                   # as written: uqkit imported first, default dtype left as it set it
    python forecast_load.py --restore-dtype   # set the default back to float32 right after the import
                                              # (uqkit still fits its GP in float64, explicitly, once at start-up)
"""
import argparse
import math
import queue
import threading
import time

import torch
import uqkit
from torch import nn

HISTORY, HORIZON, FEATURES = 168, 24, 6  # a week of hourly load + calendar/weather features, a day ahead


def synthetic_series(hours, gen):
    t = torch.arange(hours, dtype=torch.get_default_dtype())
    daily = torch.sin(2 * math.pi * t / 24)
    weekly = torch.sin(2 * math.pi * t / 168)
    temp = torch.cumsum(torch.randn(hours, generator=gen), 0) * 0.05
    load = 1.0 + 0.4 * daily + 0.2 * weekly + 0.3 * temp + 0.05 * torch.randn(hours, generator=gen)
    return torch.stack([load, daily, weekly, temp, torch.cos(2 * math.pi * t / 24), torch.cos(2 * math.pi * t / 168)], 1)


class WindowSampler(threading.Thread):
    """Cuts random (history, horizon) windows out of the series and normalises them."""

    def __init__(self, series, batch_size, out, seed=1):
        super().__init__(name="window-sampler", daemon=True)
        self.series, self.batch_size, self.out = series, batch_size, out
        self.gen = torch.Generator().manual_seed(seed)

    def run(self):
        n = self.series.shape[0] - HISTORY - HORIZON
        while True:
            starts = torch.randint(0, n, (self.batch_size,), generator=self.gen)
            idx = starts[:, None] + torch.arange(HISTORY + HORIZON)[None, :]
            win = self.series[idx]  # (B, H+F, FEATURES)
            mu, sd = win[:, :HISTORY].mean(1, keepdim=True), win[:, :HISTORY].std(1, keepdim=True) + 1e-6
            win = (win - mu) / sd
            noise = 0.01 * torch.randn(win[:, :HISTORY].shape, generator=self.gen)  # input jitter
            self.out.put(((win[:, :HISTORY] + noise).flatten(1), win[:, HISTORY:, 0]))


class Forecaster(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(HISTORY * FEATURES, 512), nn.GELU(), nn.Linear(512, 512), nn.GELU(),
                                 nn.Linear(512, 256), nn.GELU(), nn.Linear(256, HORIZON))

    def forward(self, x):
        return self.net(x)


def train(batches, calibrator, log_every):
    model = Forecaster()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    step, t0 = 0, time.time()
    while True:
        x, y = batches.get()
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        if step % log_every == 0:
            now = time.time()
            band = calibrator.std(model(x[:8]).detach()[:, 0]).mean()
            print(f"step {step} mse {loss.item():.4f} std~{band.item():.3f} dtype={x.dtype} "
                  f"{log_every / (now - t0):.2f} steps/s", flush=True)
            t0 = now


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--restore-dtype", action="store_true")
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--log-every", type=int, default=10)
    args = ap.parse_args()
    if args.restore_dtype:
        torch.set_default_dtype(torch.float32)
    gen = torch.Generator().manual_seed(0)
    series = synthetic_series(24 * 365 * 2, gen)
    # Calibrate the GP once on a held-out slice (uqkit computes in float64 whatever the default).
    held_out = series[-2000:, 0]
    calibrator = uqkit.RBFCalibrator(lengthscale=0.5).fit(held_out[:-1][:512], (held_out[1:] - held_out[:-1])[:512])
    print(f"series {tuple(series.shape)} {series.dtype}, default dtype {torch.get_default_dtype()}", flush=True)
    batches = queue.Queue(maxsize=6)
    WindowSampler(series, args.batch_size, batches).start()
    trainer = threading.Thread(target=train, args=(batches, calibrator, args.log_every), name="trainer")
    trainer.start()
    trainer.join()


if __name__ == "__main__":
    main()
