#!/usr/bin/env python3
"""Character recogniser for scanned forms (CPU).

Each epoch a render pool of 2 worker processes synthesises a fresh set of
glyph images (glyphs.render_chunk); a feeder thread collects the chunks and
queues mini-batches; the training thread fits a small CNN with SGD.  The
pool is rebuilt every epoch so each epoch gets fresh seeds and memory does
not creep.  Progress: `step N loss X steps/s=Y` every 25 steps.

Run:   python train.py
       python train.py --start-method fork
"""
import argparse
import queue
import signal
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from glyphs import N_CLASSES, render_chunk
from runtime import configure_processes

BATCH, CHUNK, CHUNKS_PER_EPOCH = 64, 64, 96


class Recogniser(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 16, 3, padding=1)
        self.c2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32 * 8 * 8, N_CLASSES)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        return self.fc(x.flatten(1))


def feeder(q, stop):
    try:
        _feed(q, stop)
    except Exception:
        if not stop.is_set():
            raise


def _feed(q, stop):
    epoch = 0
    while not stop.is_set():
        with ProcessPoolExecutor(max_workers=2) as pool:
            jobs = [(epoch * 1000 + i, CHUNK) for i in range(CHUNKS_PER_EPOCH)]
            for imgs, labels in pool.map(render_chunk, jobs):
                x = torch.from_numpy(imgs).unsqueeze(1)
                y = torch.from_numpy(labels.astype(np.int64))
                for s in range(0, CHUNK, BATCH):
                    while not stop.is_set():
                        try:
                            q.put((x[s:s + BATCH], y[s:s + BATCH]), timeout=0.5)
                            break
                        except queue.Full:
                            pass
                if stop.is_set():
                    break
        epoch += 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--start-method", default=None, help="multiprocessing start method (default: runtime's)")
    args = ap.parse_args()
    configure_processes(args.start_method)
    torch.set_num_threads(1)
    torch.manual_seed(0)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: (stop.set(), sys.exit(0)))
    q = queue.Queue(maxsize=16)
    threading.Thread(target=feeder, args=(q, stop), name="render-feeder", daemon=True).start()

    model = Recogniser()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    step, t_last, s_last = 0, time.time(), 0
    try:
        while True:
            x, y = q.get()
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step % 25 == 0:
                now = time.time()
                print(f"step {step} loss {loss.item():.4f} steps/s={(step - s_last) / (now - t_last):.2f}", flush=True)
                t_last, s_last = now, step
    finally:
        stop.set()


if __name__ == "__main__":
    main()
