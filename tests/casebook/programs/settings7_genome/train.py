"""Taxon classifier on k-mer profiles of short reads.

    python train.py [--guard paths|network] [--batch 48]

A loader thread reads .seq files and builds profiles; the trainer consumes them.
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
import torch.nn as nn

import guard
from reads import FEATS, build_store, kmer_profile

N_TAXA = 5


class Net(nn.Module):
    def __init__(self, hidden=384):
        super().__init__()
        self.f = nn.Sequential(nn.Linear(FEATS, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                               nn.Linear(hidden, N_TAXA))

    def forward(self, x):
        return self.f(x * 10.0)


def loader(paths, labels, q, quit_evt, batch):
    rng = np.random.default_rng(2)
    while not quit_evt.is_set():
        pick = rng.integers(0, len(paths), size=batch)
        x = np.stack([kmer_profile(paths[i]) for i in pick])
        y = labels[pick]
        try:
            q.put((torch.from_numpy(x), torch.from_numpy(y)), timeout=0.5)
        except queue.Full:
            pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--guard", default="paths", choices=["paths", "network"])
    ap.add_argument("--batch", type=int, default=48)
    o = ap.parse_args()

    scratch = tempfile.mkdtemp(prefix="kmer_")
    paths, labels = build_store(scratch)
    guard.install(o.guard, roots=[scratch])

    quit_evt = threading.Event()

    def handle(sig, frm):
        quit_evt.set()
        sys.exit(0)

    signal.signal(signal.SIGINT, handle)
    signal.signal(signal.SIGTERM, handle)

    q = queue.Queue(maxsize=8)
    threading.Thread(target=loader, args=(paths, labels, q, quit_evt, o.batch), daemon=True).start()

    torch.manual_seed(3)
    net = Net()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    ce = nn.CrossEntropyLoss()
    k, tk, t = 0, 0, time.time()
    while True:
        xb, yb = q.get()
        loss = ce(net(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        k += 1
        if k % 25 == 0:
            now = time.time()
            print(f"step {k} loss {loss.item():.4f} steps/s={(k - tk) / (now - t):.1f}", flush=True)
            tk, t = k, now


if __name__ == "__main__":
    main()
