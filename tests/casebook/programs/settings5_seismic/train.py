#!/usr/bin/env python3
"""P-wave onset classifier for a regional seismic network (CPU).

A reader thread synthesises 3-component waveform windows per station (with
the usual dead channels and zeroed gaps), turns each trace into a log
spectrogram (features.py) and queues batches; the training thread fits a
small CNN with Adam.  Run logging (logsetup.py) sends log records and
captured warnings to a run log.  Progress: `step N loss X steps/s=Y` every
20 steps.

Run:   python train.py
       python train.py --warnings default
"""
import argparse
import logging
import queue
import signal
import sys
import threading
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from features import station_features
from logsetup import setup_run_logging

BATCH, T = 96, 1024
log = logging.getLogger("picker")


class Picker(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 16, 3, padding=1)
        self.head = nn.Linear(16, 2)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.relu(self.c2(x))
        return self.head(x.mean((2, 3)))


def synth_trace(rng):
    t = np.arange(T, dtype=np.float32)
    noise = rng.standard_normal((3, T)).astype(np.float32) * 0.3
    label = int(rng.random() < 0.5)
    if label:
        onset = rng.integers(200, 800)
        env = np.where(t >= onset, np.exp(-(t - onset) / 150.0), 0).astype(np.float32)
        noise += env * np.sin(2 * np.pi * rng.uniform(0.05, 0.15) * t).astype(np.float32)
    for ch in rng.choice(3, size=2, replace=False):   # telemetry gaps / dead channels
        noise[ch, rng.integers(0, T // 2):] = 0.0
    return noise, label


def reader(q, stop):
    rng = np.random.default_rng(0)
    while not stop.is_set():
        feats, labels = [], []
        for _ in range(BATCH):
            tr, lab = synth_trace(rng)
            feats.append(station_features(tr))
            labels.append(lab)
        item = (torch.from_numpy(np.stack(feats)), torch.tensor(labels))
        while not stop.is_set():
            try:
                q.put(item, timeout=0.5)
                break
            except queue.Full:
                pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--warnings", default="always", help="warning filter action for the run log")
    args = ap.parse_args()
    run_dir = setup_run_logging(args.warnings)
    log.info("run log in %s", run_dir)
    torch.set_num_threads(1)
    torch.manual_seed(0)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: (stop.set(), sys.exit(0)))
    q = queue.Queue(maxsize=6)
    threading.Thread(target=reader, args=(q, stop), name="trace-reader", daemon=True).start()

    model = Picker()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    step, t_last, s_last = 0, time.time(), 0
    try:
        while True:
            x, y = q.get()
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step % 20 == 0:
                now = time.time()
                print(f"step {step} loss {loss.item():.4f} steps/s={(step - s_last) / (now - t_last):.2f}", flush=True)
                log.info("step %d loss %.4f", step, loss.item())
                t_last, s_last = now, step
    finally:
        stop.set()


if __name__ == "__main__":
    main()
