#!/usr/bin/env python3
"""Sonar echo classifier.

Producer thread synthesises pings; the main thread trains a deep, narrow MLP.
    python train.py [--native-trace trace|quiet] [--batch 32]
"""
import argparse
import signal
import sys
import tempfile
import threading
import time
from queue import Empty, Full, Queue

import runtime


def parse():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--native-trace", default="trace", choices=sorted(runtime.NATIVE_ENV))
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--depth", type=int, default=16)
    ap.add_argument("--width", type=int, default=144)
    return ap.parse_args()


ARGS = parse()
RUN_DIR = tempfile.mkdtemp(prefix="sonar.")
runtime.prepare(RUN_DIR, ARGS.native_trace)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

from pings import CLASSES, N_BEAMS, N_BINS, echo_batch  # noqa: E402


def make_net(depth, width):
    layers = [nn.Linear(N_BEAMS * N_BINS, width), nn.ReLU()]
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    layers.append(nn.Linear(width, len(CLASSES)))
    return nn.Sequential(*layers)


class PingSource(threading.Thread):
    def __init__(self, batch):
        super().__init__(name="ping-source", daemon=True)
        self.batch = batch
        self.q = Queue(maxsize=16)
        self.done = threading.Event()

    def run(self):
        rng = np.random.default_rng(5)
        while not self.done.is_set():
            x, y = echo_batch(rng, self.batch)
            item = (torch.from_numpy(x), torch.from_numpy(y))
            while not self.done.is_set():
                try:
                    self.q.put(item, timeout=0.2)
                    break
                except Full:
                    pass

    def next(self):
        while True:
            try:
                return self.q.get(timeout=1.0)
            except Empty:
                if not self.is_alive():
                    raise RuntimeError("ping source died")


def main():
    torch.manual_seed(1)
    src = PingSource(ARGS.batch)

    def bye(signum, frame):
        src.done.set()
        sys.exit(0)

    signal.signal(signal.SIGTERM, bye)
    signal.signal(signal.SIGINT, bye)
    src.start()

    net = make_net(ARGS.depth, ARGS.width)
    sgd = torch.optim.SGD(net.parameters(), lr=0.005, momentum=0.9)
    lossf = nn.CrossEntropyLoss()
    it, clock, last = 0, time.time(), 0
    while True:
        x, y = src.next()
        out = net(x)
        loss = lossf(out, y)
        sgd.zero_grad()
        loss.backward()
        sgd.step()
        it += 1
        if it % 25 == 0:
            now = time.time()
            print(f"step {it} loss {loss.item():.4f} steps/s={(it - last) / (now - clock):.1f}", flush=True)
            clock, last = now, it


if __name__ == "__main__":
    main()
