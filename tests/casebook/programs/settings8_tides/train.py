"""Storm-surge forecaster: 24 h of gauge history -> next 6 h of water level.

    gauge reader thread --(queue)--> trainer (main thread)
    lineage tracker thread (inotify on the data directory)

usage: python train.py [--lineage reads|writes] [--batch 32]
"""
import argparse
import queue
import shutil
import signal
import tempfile
import threading
import time

import numpy as np
import torch
from torch import nn

import lineage
from gauges import build_archive

HISTORY, HORIZON = 96, 24             # records (15 min): 24 h in, 6 h out
N_FEATURES = 4                        # level, pressure, wind u, wind v


class SurgeNet(nn.Module):
    def __init__(self, hidden=256):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(HISTORY * N_FEATURES, hidden), nn.GELU(),
            nn.Linear(hidden, hidden), nn.GELU(),
            nn.Linear(hidden, HORIZON),
        )

    def forward(self, x):
        return self.net(x.flatten(1))


def reader(archive, q, halt, batch):
    rng = np.random.default_rng(1)
    while not halt.is_set():
        xs, ys = [], []
        for s in rng.integers(0, archive.n_stations, size=batch):
            t0 = int(rng.integers(0, archive.n_times - HISTORY - HORIZON))
            rec = archive.window(int(s), t0, HISTORY + HORIZON)
            mean = rec[:HISTORY, 0].mean()
            rec[:, 0] -= mean
            xs.append(rec[:HISTORY])
            ys.append(rec[HISTORY:, 0])
        item = (torch.from_numpy(np.stack(xs)), torch.from_numpy(np.stack(ys)))
        while not halt.is_set():
            try:
                q.put(item, timeout=0.2)
                break
            except queue.Full:
                pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lineage", choices=sorted(lineage.MASKS), default="reads")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-3)
    args = ap.parse_args()

    torch.manual_seed(0)
    root = tempfile.mkdtemp(prefix="gauges-")
    archive = build_archive(root)
    tracker = lineage.Tracker(root, args.lineage)
    halt = threading.Event()

    def on_signal(signum, frame):
        halt.set()
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    q = queue.Queue(maxsize=8)
    th = threading.Thread(target=reader, args=(archive, q, halt, args.batch), name="gauge-reader", daemon=True)
    th.start()

    model = SurgeNet()
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    step, t0, s0 = 0, time.perf_counter(), 0
    try:
        while True:
            x, y = q.get()
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step % 25 == 0:
                now = time.perf_counter()
                print(f"step {step} loss {loss.item():.4f} steps/s={(step - s0) / (now - t0):.1f}", flush=True)
                t0, s0 = now, step
    finally:
        halt.set()
        th.join(timeout=1)
        archive.close()
        tracker.close()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
