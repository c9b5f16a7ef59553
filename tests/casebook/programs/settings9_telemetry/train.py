"""Fleet telemetry forecaster: 48 samples of six CAN signals -> the next 16.

    collector thread (replays the drive log over a Unix socket)
    feed reader thread (frames -> per-vehicle windows -> batches) --(queue)--> trainer (main thread)

usage: python train.py [--net-profile guarded|blocking] [--batch 64] [--steps N]
"""
import argparse
import queue
import signal
import socket
import threading
import time
from collections import defaultdict

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import netdefaults
from feed import CHANNELS, SAMPLES, Collector, FrameReader

TICKS = 32                          # ticks per window (64 samples)
CONTEXT, HORIZON = 48, 16


class Forecaster(nn.Module):
    def __init__(self, width=32):
        super().__init__()
        self.enc = nn.Sequential(
            nn.Conv1d(CHANNELS, width, 5, padding=2), nn.GELU(),
            nn.Conv1d(width, width, 5, padding=2, stride=2), nn.GELU(),
            nn.Conv1d(width, width, 3, padding=1, stride=2), nn.GELU(),
        )
        self.head = nn.Linear(width * CONTEXT // 4, CHANNELS * HORIZON)

    def forward(self, x):
        return self.head(self.enc(x).flatten(1)).view(-1, CHANNELS, HORIZON)


def feed_reader(path, q, halt, batch):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    frames_in = FrameReader(sock)
    pending = defaultdict(list)
    ready = []
    while not halt.is_set():
        vehicle, _, payload = frames_in.read()
        frames = pending[vehicle]
        frames.append(payload)
        if len(frames) == TICKS:
            ticks = np.frombuffer(b"".join(frames), dtype=np.float32).reshape(TICKS, CHANNELS, SAMPLES)
            window = ticks.transpose(1, 0, 2).reshape(CHANNELS, TICKS * SAMPLES)
            scale = np.abs(window[:, :CONTEXT]).max(axis=1, keepdims=True) + 1e-3
            ready.append(window / scale)
            pending[vehicle] = []
        if len(ready) == batch:
            x = torch.from_numpy(np.stack(ready))
            ready = []
            while not halt.is_set():
                try:
                    q.put((x[:, :, :CONTEXT], x[:, :, CONTEXT:]), timeout=0.2)
                    break
                except queue.Full:
                    pass
    sock.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--net-profile", choices=sorted(netdefaults.DEFAULT_TIMEOUTS), default="guarded")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=10_000_000)
    ap.add_argument("--lr", type=float, default=1e-3)
    args = ap.parse_args()

    netdefaults.apply(args.net_profile)
    torch.set_num_threads(1)      # one core for the trainer, the other for the feed
    torch.manual_seed(0)
    collector = Collector()
    halt = threading.Event()

    def on_signal(signum, frame):
        halt.set()
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    q = queue.Queue(maxsize=8)
    th = threading.Thread(target=feed_reader, args=(collector.path, q, halt, args.batch), name="feed-reader",
                          daemon=True)
    th.start()

    model = Forecaster()
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    step, t0, s0 = 0, time.perf_counter(), 0
    try:
        while step < args.steps:
            x, y = q.get()
            loss = F.smooth_l1_loss(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step % 50 == 0:
                now = time.perf_counter()
                print(f"step {step} loss {loss.item():.4f} steps/s={(step - s0) / (now - t0):.1f}", flush=True)
                t0, s0 = now, step
    finally:
        halt.set()
        th.join(timeout=1)
        collector.close()


if __name__ == "__main__":
    main()
