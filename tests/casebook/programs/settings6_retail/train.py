#!/usr/bin/env python3
"""basket2qty: predict purchase quantity from the basket's items.

The product catalogue (dense item features) lives in memory; a loader
thread decompresses the daily transaction extracts and queues batches, the
main thread trains the scorer.  Logs `step N loss X steps/s=Y` every 25.

usage: python train.py [--child-spawn {fork,vfork}]
"""
import argparse
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import platform_compat
import shards

N_ITEMS = 1_800_000
FEAT = 64
BATCH = 48


class BasketScorer(nn.Module):
    def __init__(self, feat=FEAT, hidden=512):
        super().__init__()
        self.proj = nn.Linear(feat, hidden)
        self.item_mlp = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.out = nn.Linear(hidden, 1)

    def forward(self, item_feats):            # [B, 8, feat]
        h = self.item_mlp(F.relu(self.proj(item_feats)))
        return self.out(h.mean(dim=1)).squeeze(-1)


class Loader(threading.Thread):
    def __init__(self, paths, q):
        super().__init__(name="extract-loader", daemon=True)
        self.paths, self.q, self.done = paths, q, threading.Event()

    def run(self):
        i = 0
        while not self.done.is_set():
            try:
                items, qty = shards.read_extract(self.paths[i % len(self.paths)])
            except subprocess.CalledProcessError as err:
                if err.returncode < 0:      # gzip killed with us (Ctrl-C / SIGTERM to the group)
                    return
                raise
            i += 1
            for s in range(0, len(qty), BATCH):
                batch = (torch.from_numpy(items[s:s + BATCH]), torch.from_numpy(qty[s:s + BATCH]).float())
                while not self.done.is_set():
                    try:
                        self.q.put(batch, timeout=0.5)
                        break
                    except queue.Full:
                        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--child-spawn", choices=["fork", "vfork"], default=None)
    args = ap.parse_args()
    platform_compat.apply(args.child_spawn)

    torch.set_num_threads(1)
    torch.manual_seed(0)
    workdir = tempfile.mkdtemp(prefix="basket2qty-")
    catalogue = torch.randn(N_ITEMS, FEAT)          # dense item features (~460 MB)
    paths = shards.write_extracts(workdir, N_ITEMS)

    q = queue.Queue(maxsize=12)
    loader = Loader(paths, q)

    def on_signal(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    loader.start()

    model = BasketScorer()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    step, last_t, last_s = 0, time.time(), 0
    try:
        while True:
            items, qty = q.get()
            feats = catalogue[items]
            loss = F.mse_loss(model(feats), qty)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if step % 25 == 0:
                now = time.time()
                print(f"step {step} loss {loss.item():.4f} steps/s={(step - last_s) / (now - last_t):.2f}", flush=True)
                last_t, last_s = now, step
    except KeyboardInterrupt:
        pass
    finally:
        loader.done.set()
        loader.join(timeout=5)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
