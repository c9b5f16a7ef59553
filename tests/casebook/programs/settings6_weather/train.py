#!/usr/bin/env python3
"""Next-hour temperature forecaster over a network of weather stations.

A reader thread cuts 48-hour windows out of the station archive and builds
the per-hour feature rows; the main thread trains a small temporal conv net.
Prints `step N loss X steps/s=Y` every 25 steps.  Ctrl-C / SIGTERM to stop.

    python train.py                      # watchdog traces every line
    python train.py --watchdog sample    # watchdog samples frames once a second
"""
import argparse
import queue
import random
import signal
import sys
import threading
import time

import numpy as np
import torch
from torch import nn

import stations
from watchdog import StallWatchdog

BATCH = 32
N_STATIONS = 40
HOURS = 24 * 60


class TempNet(nn.Module):
    def __init__(self, n_in=stations.N_VARS, width=64):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv1d(n_in, width, 5, padding=2), nn.GELU(),
            nn.Conv1d(width, width, 5, padding=2), nn.GELU(),
            nn.Conv1d(width, width, 5, padding=2), nn.GELU(),
        )
        self.head = nn.Sequential(nn.Linear(width * stations.WINDOW, 128), nn.GELU(), nn.Linear(128, 1))

    def forward(self, x):
        h = self.body(x.transpose(1, 2))
        return self.head(h.flatten(1)).squeeze(1)


def reader(archive, out_q, halt):
    rng = random.Random(7)
    while not halt.is_set():
        xs, ys = [], []
        for _ in range(BATCH):
            s = rng.randrange(len(archive))
            start = rng.randrange(HOURS - stations.WINDOW - 1)
            f, y = stations.window_features(archive[s], start)
            xs.append(f)
            ys.append(y)
        x = torch.tensor(xs)
        y = torch.tensor(ys)
        x = (x - x.mean(dim=(0, 1), keepdim=True)) / (x.std(dim=(0, 1), keepdim=True) + 1e-5)
        while not halt.is_set():
            try:
                out_q.put((x, (y - 10.0) / 10.0), timeout=0.5)
                break
            except queue.Full:
                continue


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--watchdog", choices=("trace", "sample"), default="trace")
    p.add_argument("--stall-limit", type=float, default=300.0)
    opts = p.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(1)
    dog = StallWatchdog(opts.stall_limit, mode=opts.watchdog)
    halt = threading.Event()

    def _bye(*_):
        halt.set()
        sys.exit(0)

    signal.signal(signal.SIGTERM, _bye)
    signal.signal(signal.SIGINT, _bye)

    with dog.startup():
        rng = random.Random(3)
        archive = [stations.make_station(rng, HOURS) for _ in range(N_STATIONS)]
        net = TempNet()
        opt = torch.optim.AdamW(net.parameters(), lr=2e-3, weight_decay=1e-4)
        loss_fn = nn.SmoothL1Loss()
    dog.arm()

    q = queue.Queue(maxsize=8)
    feeder = threading.Thread(target=reader, args=(archive, q, halt), name="station-reader", daemon=True)
    feeder.start()

    step, t0, s0 = 0, time.time(), 0
    try:
        while True:
            x, y = q.get()
            pred = net(x)
            loss = loss_fn(pred, y)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            dog.heartbeat()
            step += 1
            if step % 25 == 0:
                now = time.time()
                print(f"step {step} loss {loss.item():.4f} steps/s={(step - s0) / (now - t0):.2f}", flush=True)
                t0, s0 = now, step
    finally:
        halt.set()
        feeder.join(timeout=5)


if __name__ == "__main__":
    main()
