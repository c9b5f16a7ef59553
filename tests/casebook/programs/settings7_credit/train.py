"""Credit default scorer (tabular MLP), streaming applicant batches.

  feeder thread -> Queue -> main loop

usage: python train.py [--log-detail full|summary]
"""
import argparse
import queue
import signal
import tempfile
import threading
import time

import numpy as np
import torch
import torch.nn.functional as F

import settings
from journal import open_journal

N_FEATURES = 240
JOURNAL_EVERY = 2


class Scorer(torch.nn.Module):
    def __init__(self, width=512):
        super().__init__()
        self.l1 = torch.nn.Linear(N_FEATURES, width)
        self.l2 = torch.nn.Linear(width, width)
        self.l3 = torch.nn.Linear(width, 1)
        self.drop = torch.nn.Dropout(0.1)

    def forward(self, x):
        h = self.drop(F.relu(self.l1(x)))
        h = self.drop(F.relu(self.l2(h)))
        return self.l3(h).squeeze(1)


def feeder(q, halt, batch):
    rng = np.random.default_rng(1)
    w = rng.normal(size=N_FEATURES).astype(np.float32)
    while not halt.is_set():
        x = rng.normal(size=(batch, N_FEATURES)).astype(np.float32)
        y = ((x @ w + rng.normal(scale=2.0, size=batch)) > 0).astype(np.float32)
        try:
            q.put((torch.from_numpy(x), torch.from_numpy(y)), timeout=0.5)
        except queue.Full:
            continue


def run():
    p = argparse.ArgumentParser()
    p.add_argument("--log-detail", default=settings.DEFAULTS["log_detail"], choices=["full", "summary"])
    p.add_argument("--batch", type=int, default=settings.DEFAULTS["batch"])
    args = p.parse_args()
    cfg = dict(settings.DEFAULTS, log_detail=args.log_detail, batch=args.batch)
    settings.apply(cfg)

    run_dir = tempfile.mkdtemp(prefix="credit_")
    journal = open_journal(run_dir)
    halt = threading.Event()

    def stop(*_):
        halt.set()
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    q = queue.Queue(maxsize=6)
    th = threading.Thread(target=feeder, args=(q, halt, cfg["batch"]), daemon=True, name="feeder")
    th.start()

    net = Scorer()
    opt = torch.optim.Adam(net.parameters(), lr=cfg["lr"])
    n, t0, n0 = 0, time.monotonic(), 0
    try:
        while True:
            xb, yb = q.get()
            logits = net(xb)
            loss = F.binary_cross_entropy_with_logits(logits, yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            n += 1
            # first applicants of the batch and their scores, for the audit trail
            if n % JOURNAL_EVERY == 0:
                journal.info("step %d first rows %s scores %s", n, xb[:8], logits[:8].detach())
            if n % 25 == 0:
                t = time.monotonic()
                print("step %d loss %.4f steps/s=%.1f" % (n, loss.item(), (n - n0) / (t - t0)), flush=True)
                t0, n0 = t, n
    finally:
        halt.set()
        th.join(timeout=2)


if __name__ == "__main__":
    run()
