"""Next-basket recommender for a grocery app, trained against a frozen catalogue table.

The catalogue embedding table (one 128-d vector per product, exported by the offline
item model) stays in memory. A basket-builder thread samples shopper histories, gathers
and pools their product vectors and draws sampled negatives; the main thread trains the
query tower with a sampled-softmax loss. A memory telemetry agent (memwatch.py, child
process) samples the trainer's memory for the capacity dashboard as the profile says.

    python train.py                                  # configs/capacity_ws.toml
    python train.py --config configs/capacity_peak.toml
"""
import argparse
import os
import queue
import signal
import subprocess
import sys
import threading
import tomllib

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CONFIG = os.path.join("configs", "capacity_ws.toml")


def load_config(path):
    for cand in (path, os.path.join(HERE, path)):
        if os.path.exists(cand):
            with open(cand, "rb") as f:
                return tomllib.load(f)
    raise SystemExit(f"config not found: {path}")


def start_memwatch(mw):
    return subprocess.Popen(
        [sys.executable, os.path.join(HERE, "memwatch.py"), "--pid", str(os.getpid()),
         "--metric", mw["metric"], "--interval-ms", str(mw["interval_ms"])],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)


class Catalogue:
    def __init__(self, n_items, dim, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.vectors = torch.empty(n_items, dim)
        step = 1 << 18
        for lo in range(0, n_items, step):
            self.vectors[lo:lo + step].normal_(generator=g).mul_(dim ** -0.5)
        self.n_items = n_items

    def gather(self, ids):
        return self.vectors.index_select(0, ids.reshape(-1)).view(*ids.shape, -1)


def basket_builder(cat, bc, out, stop):
    g = torch.Generator().manual_seed(1)
    b, hist, negs = bc["shoppers"], bc["history"], bc["negatives"]
    while not stop.is_set():
        anchor = torch.randint(0, cat.n_items, (b, 1), generator=g)
        # a shopper's history clusters around a few aisles of the catalogue
        spread = torch.randint(-4096, 4096, (b, hist), generator=g)
        hist_ids = (anchor + spread).clamp_(0, cat.n_items - 1)
        pos_ids = (anchor[:, 0] + torch.randint(-512, 512, (b,), generator=g)).clamp_(0, cat.n_items - 1)
        neg_ids = torch.randint(0, cat.n_items, (b, negs), generator=g)
        user = cat.gather(hist_ids).mean(1)
        item = cat.gather(torch.cat([pos_ids[:, None], neg_ids], 1))
        while not stop.is_set():
            try:
                out.put((user, item), timeout=0.2)
                break
            except queue.Full:
                continue


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=DEFAULT_CONFIG)
    ap.add_argument("--steps", type=int, default=10**9)
    args = ap.parse_args()
    cfg = load_config(args.config)
    cc, bc, tr = cfg["catalogue"], cfg["baskets"], cfg["train"]

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    torch.set_num_threads(1)
    torch.manual_seed(0)

    cat = Catalogue(cc["items"], cc["dim"])
    memwatch = start_memwatch(cfg["memwatch"])
    q = queue.Queue(maxsize=tr["queue_depth"])
    builder = threading.Thread(target=basket_builder, name="basket-builder", daemon=True,
                               args=(cat, bc, q, stop))
    try:
        builder.start()
        d, h = cc["dim"], tr["hidden"]
        tower = nn.Sequential(nn.Linear(d, h), nn.GELU(), nn.Linear(h, h), nn.GELU(), nn.Linear(h, d))
        opt = torch.optim.Adam(tower.parameters(), lr=tr["lr"])
        target = torch.zeros(bc["shoppers"], dtype=torch.long)
        step = 0
        while not stop.is_set() and step < args.steps:
            try:
                user, item = q.get(timeout=0.5)
            except queue.Empty:
                continue
            query = tower(user)
            logits = torch.einsum("bd,bkd->bk", query, item) / tr["temperature"]
            loss = nn.functional.cross_entropy(logits, target)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            print(f"step {step} loss {loss.item():.5f}", flush=True)
    finally:
        stop.set()
        builder.join(timeout=5)
        if memwatch.poll() is None:
            memwatch.terminate()
            try:
                memwatch.wait(timeout=3)
            except subprocess.TimeoutExpired:
                memwatch.kill()
                memwatch.wait()


if __name__ == "__main__":
    main()
