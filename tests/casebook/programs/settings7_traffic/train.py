"""Traffic speed forecaster: 1 hour of loop-detector history -> next 5-minute speed.

reader thread  --(queue)-->  trainer (main thread)

    python train.py [--seccomp audit|basic] [--batch 64]
"""
import argparse
import queue
import signal
import sys
import tempfile
import threading
import time

import numpy as np
import torch
from torch import nn

import sandbox
from loops import CHANNELS, N_DETECTORS, WINDOW, LoopArchive

COMPONENTS = ("reader", "trainer", "metrics", "checkpoint", "export", "main")


class Forecaster(nn.Module):
    def __init__(self, hidden=256):
        super().__init__()
        self.body = nn.Sequential(
            nn.Linear(WINDOW * CHANNELS, hidden), nn.GELU(),
            nn.Linear(hidden, hidden), nn.GELU(),
            nn.Linear(hidden, hidden), nn.GELU(),
        )
        self.head = nn.Linear(hidden, 1)

    def forward(self, x):
        return self.head(self.body(x)).squeeze(-1)


def reader(archive, out, stop, batch):
    rng = np.random.default_rng(11)
    while not stop.is_set():
        dets = rng.integers(0, N_DETECTORS, size=batch)
        starts = rng.integers(0, archive.slots - WINDOW - 1, size=batch)
        xs, ys = [], []
        for d, t0 in zip(dets, starts):
            x, y = archive.sample(int(d), int(t0))
            xs.append(x)
            ys.append(y)
        item = (torch.from_numpy(np.stack(xs)), torch.tensor(ys))
        while not stop.is_set():
            try:
                out.put(item, timeout=0.25)
                break
            except queue.Full:
                pass


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--seccomp", choices=("audit", "basic"), default="audit")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=256)
    opts = ap.parse_args(argv)

    torch.manual_seed(0)
    workdir = tempfile.mkdtemp(prefix="loops-")
    archive = LoopArchive(workdir)
    model = Forecaster(opts.hidden)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    for comp in COMPONENTS:
        sandbox.confine(comp, opts.seccomp)

    stop = threading.Event()

    def on_signal(signum, frame):
        stop.set()
        sys.exit(0)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    q = queue.Queue(maxsize=8)
    th = threading.Thread(target=reader, args=(archive, q, stop, opts.batch), name="loop-reader", daemon=True)
    th.start()

    step, t_last, s_last = 0, time.perf_counter(), 0
    try:
        while True:
            x, y = q.get()
            pred = model(x)
            loss = nn.functional.smooth_l1_loss(pred, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step % 25 == 0:
                now = time.perf_counter()
                rate = (step - s_last) / (now - t_last)
                print(f"step {step} loss {loss.item():.4f} steps/s={rate:.1f}", flush=True)
                t_last, s_last = now, step
    finally:
        stop.set()
        th.join(timeout=2)
        archive.close()


if __name__ == "__main__":
    main()
