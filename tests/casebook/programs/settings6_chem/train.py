#!/usr/bin/env python3
"""Solubility regressor on compound fingerprints.

  sampler thread -> queue -> trainer (main thread)

Every example served is written to the audit ledger (ledger.py).
Progress every 25 steps: step N loss X steps/s=Y.

  python train.py [--ledger-sync dsync|none] [--batch 48]
"""
import argparse
import os
import queue
import signal
import tempfile
import threading
import time

import numpy as np
import torch
import torch.nn as nn

from compounds import FP_BITS, Library
from ledger import Ledger

CKPT_EVERY = 500


def build_model(width):
    return nn.Sequential(
        nn.Linear(FP_BITS, width), nn.SiLU(), nn.LayerNorm(width),
        nn.Linear(width, width), nn.SiLU(), nn.LayerNorm(width),
        nn.Linear(width, width), nn.SiLU(),
        nn.Linear(width, 1),
    )


def sampler(lib, ledger, out, stopping, batch, epoch_seed=0):
    rng = np.random.default_rng(epoch_seed)
    while not stopping.is_set():
        idx = rng.integers(0, len(lib), size=batch)
        for i in idx:
            ledger.record(id=lib.ids[i], fp=lib.digest(i), t=round(time.time(), 3))
        x = torch.from_numpy(lib.fps[idx])
        y = torch.from_numpy(lib.y[idx])
        while not stopping.is_set():
            try:
                out.put((x, y), timeout=0.2)
                break
            except queue.Full:
                continue


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ledger-sync", default="dsync", choices=["dsync", "none"])
    parser.add_argument("--batch", type=int, default=48)
    parser.add_argument("--width", type=int, default=384)
    a = parser.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(42)
    run_dir = tempfile.mkdtemp(prefix="solub-")
    lib = Library()
    ledger = Ledger(os.path.join(run_dir, "served.jsonl"), sync=a.ledger_sync)

    stopping = threading.Event()

    def _term(signum, frame):
        stopping.set()
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, _term)
    signal.signal(signal.SIGINT, _term)

    q = queue.Queue(maxsize=10)
    t = threading.Thread(target=sampler, args=(lib, ledger, q, stopping, a.batch), name="sampler", daemon=True)
    t.start()

    model = build_model(a.width)
    optim = torch.optim.Adam(model.parameters(), lr=5e-4)
    crit = nn.MSELoss()
    step, mark_t, mark_s = 0, time.time(), 0
    try:
        while True:
            x, y = q.get()
            loss = crit(model(x).squeeze(1), y)
            optim.zero_grad()
            loss.backward()
            optim.step()
            step += 1
            if step % CKPT_EVERY == 0:
                torch.save(model.state_dict(), os.path.join(run_dir, "model.pt"))
                ledger.checkpoint()
            if step % 25 == 0:
                now = time.time()
                print(f"step {step} loss {loss.item():.5f} steps/s={(step - mark_s) / (now - mark_t):.2f}", flush=True)
                mark_t, mark_s = now, step
    finally:
        stopping.set()
        t.join(timeout=5)
        ledger.close()


if __name__ == "__main__":
    main()
