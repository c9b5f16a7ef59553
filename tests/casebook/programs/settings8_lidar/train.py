"""Object classifier for LiDAR crops (PointNet-style, CPU).

    sweep loader thread --(queue)--> trainer (main thread)

usage: python train.py [--memory-profile lean|steady] [--batch 16] [--points 1024]
"""
import argparse
import queue
import signal
import threading
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import memory
from sweeps import CLASSES, FEATURES, batch


class PointNet(nn.Module):
    def __init__(self, width=256):
        super().__init__()
        self.point_mlp = nn.Sequential(
            nn.Linear(FEATURES, 64), nn.ReLU(),
            nn.Linear(64, 128), nn.ReLU(),
            nn.Linear(128, width), nn.ReLU(),
        )
        self.head = nn.Sequential(nn.Linear(width, 128), nn.ReLU(), nn.Dropout(0.2),
                                  nn.Linear(128, len(CLASSES)))

    def forward(self, pts):
        feats = self.point_mlp(pts)            # (B, N, width)
        return self.head(feats.amax(dim=1))    # symmetric pooling over points


def loader(q, halt, size, n_points):
    rng = np.random.default_rng(5)
    while not halt.is_set():
        x, y = batch(rng, size, n_points)
        item = (torch.from_numpy(x), torch.from_numpy(y))
        while not halt.is_set():
            try:
                q.put(item, timeout=0.2)
                break
            except queue.Full:
                continue


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memory-profile", choices=sorted(memory.PROFILES), default="lean")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--points", type=int, default=1024)
    ap.add_argument("--lr", type=float, default=1e-3)
    args = ap.parse_args()

    memory.apply(args.memory_profile)
    torch.manual_seed(0)

    halt = threading.Event()

    def on_signal(signum, frame):
        halt.set()
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    q = queue.Queue(maxsize=4)
    th = threading.Thread(target=loader, args=(q, halt, args.batch, args.points),
                          name="sweep-loader", daemon=True)
    th.start()

    net = PointNet()
    opt = torch.optim.Adam(net.parameters(), lr=args.lr)
    step, t0, s0 = 0, time.perf_counter(), 0
    try:
        while True:
            pts, labels = q.get()
            logits = net(pts)
            loss = F.cross_entropy(logits, labels)
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


if __name__ == "__main__":
    main()
