"""Multi-horizon forecasting of building sensor series (GRU encoder, MLP decoder) on a GPU.

Modelled on PaccMann/paccmann_datasets#105 ("most of the time we end up calling tensor.to(device) in __getitem__";
one would rather move whole batches) and open-spaced-repetition/fsrs-optimizer#197 ("Move tensors to the target
device during initialization instead of on each access" for faster training). The Dataset places every sample on
the GPU as it is read: 2 x 512 blocking copies of a few kilobytes per batch from pageable memory, issued by the
prefetch thread on the default stream, each one waiting behind the training step already queued there.

    python train_forecaster.py                        # --place sample: Dataset.__getitem__ calls .to(device)
    python train_forecaster.py --place batch          # samples stay on the host; the batch is pinned by the
                                                      # DataLoader and copied once, non_blocking
"""
import argparse
import math
import queue
import threading
import time

import torch
import torch.nn.functional as F
from torch import nn
from windows import SensorWindows

HISTORY, HORIZON, CHANNELS = 96, 24, 16


class Forecaster(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.inp = nn.Linear(CHANNELS, hidden)
        self.gru = nn.GRU(hidden, hidden, num_layers=2, batch_first=True)
        self.dec = nn.Sequential(nn.Linear(hidden, hidden), nn.GELU(), nn.Linear(hidden, HORIZON))

    def forward(self, x):
        out, _ = self.gru(self.inp(x))
        return self.dec(out[:, -1])


def make_series(n_series, length, gen):
    t = torch.arange(length, dtype=torch.float32)
    base = torch.sin(2 * math.pi * t / 96)[None, :, None] * torch.rand(n_series, 1, CHANNELS, generator=gen)
    trend = torch.cumsum(0.01 * torch.randn(n_series, length, CHANNELS, generator=gen), 1)
    return base + trend + 0.05 * torch.randn(n_series, length, CHANNELS, generator=gen)


def prefetch(loader, out):
    """A background generator: keeps a few batches ready while the step runs."""
    while True:
        for batch in loader:
            out.put(batch)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--place", choices=("sample", "batch"), default="sample")
    ap.add_argument("--log-every", type=int, default=25)
    args = ap.parse_args()
    device = torch.device(args.device)
    gpu = device.type == "cuda"
    batch, hidden, n_series = (512, 512, 400) if gpu else (32, 32, 20)
    gen = torch.Generator().manual_seed(0)
    data = make_series(n_series, 2000, gen)
    dataset = SensorWindows(data, HISTORY, HORIZON, device=device if args.place == "sample" else None)
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch, shuffle=True, drop_last=True,
                                         pin_memory=gpu and args.place == "batch")
    model = Forecaster(hidden).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    ready = queue.Queue(maxsize=4)
    threading.Thread(target=prefetch, args=(loader, ready), name="prefetch", daemon=True).start()
    print(f"forecaster: {len(dataset):,} windows, batch {batch}, samples placed per {args.place}", flush=True)

    step, t0 = 0, time.time()
    while True:
        x, y = ready.get()
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)  # no-ops when already there
        loss = F.smooth_l1_loss(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if step % args.log_every == 0:
            print(f"step {step:>6} | loss {loss.item():.4f} | {args.log_every * batch / (time.time() - t0):,.0f} "
                  f"windows/s", flush=True)
            t0 = time.time()


if __name__ == "__main__":
    main()
