#!/usr/bin/env python3
"""kws-tiny: keyword spotting on log spectrograms, CPU.

Thread "clip-synth" renders clips and features into a queue; the main
thread trains a small residual CNN.  Every 25 steps prints
"step N loss X steps/s=Y".

    python train.py                        # numerical checks on every step
    python train.py --health-checks first  # check the first step only
"""
import argparse
import queue
import signal
import sys
import threading
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from clips import N_WORDS, ClipSynth
from health import HealthChecks


def block(c_in, c_out):
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU())


class Res(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.a = block(c, c)
        self.b = nn.Sequential(nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c))
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(x + self.b(self.a(x)))


class KWSNet(nn.Module):
    def __init__(self, c=16, depth=6):
        super().__init__()
        self.stem = nn.Sequential(block(1, c), nn.MaxPool2d(2), block(c, c), nn.MaxPool2d(2))
        self.res = nn.Sequential(*[Res(c) for _ in range(depth)])
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.drop = nn.Dropout(0.1)
        self.fc = nn.Linear(c, N_WORDS)

    def forward(self, x):
        x = self.res(self.stem(x))
        return self.fc(self.drop(self.pool(x).flatten(1)))


def synth_loop(q, stop, batch):
    synth = ClipSynth(seed=5)
    while not stop.is_set():
        item = synth.batch(batch)
        while not stop.is_set():
            try:
                q.put(item, timeout=0.25)
                break
            except queue.Full:
                pass


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--health-checks", choices=("always", "first"), default="always")
    ap.add_argument("--batch", type=int, default=16)
    args = ap.parse_args(argv)

    torch.manual_seed(0)
    torch.set_num_threads(1)
    stop = threading.Event()
    q = queue.Queue(maxsize=6)
    th = threading.Thread(target=synth_loop, args=(q, stop, args.batch), name="clip-synth", daemon=True)

    def handle(sig, frm):
        stop.set()
        th.join(timeout=5)
        sys.exit(0)

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)
    th.start()

    net = KWSNet()
    checks = HealthChecks(net, policy=args.health_checks)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    n, t_prev, n_prev = 0, time.time(), 0
    while True:
        x, y = q.get()
        logits = net(x)
        loss = F.cross_entropy(logits, y, label_smoothing=0.05)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        n += 1
        checks.after_step(n)
        if n % 25 == 0:
            t = time.time()
            print(f"step {n} loss {loss.item():.4f} steps/s={(n - n_prev) / (t - t_prev):.2f}", flush=True)
            t_prev, n_prev = t, n


if __name__ == "__main__":
    main()
