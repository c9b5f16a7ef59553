"""Behaviour classifier for GPS-tagged curlews on an estuary (foraging / roosting / flying).

A track loader thread simulates each batch of tag fixes, joins every fix with its survey
cell's habitat features, the bird's tag record and the tide slot from the habitat feature
store (featurestore.py, an in-memory SQLite snapshot opened with the profile's store
settings) and queues the batch; the main thread trains a small MLP on the joined fixes.

    python train.py                              # configs/estuary_live.toml
    python train.py --config configs/estuary_replay.toml
"""
import argparse
import math
import os
import queue
import random
import signal
import threading
import tomllib

import featurestore
import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CONFIG = os.path.join("configs", "estuary_live.toml")
N_FEAT = 6 + 4 + 2 + 3
CLASSES = 3


def load_config(path):
    for cand in (path, os.path.join(HERE, path)):
        if os.path.exists(cand):
            with open(cand, "rb") as f:
                return tomllib.load(f)
    raise SystemExit(f"config not found: {path}")


def track_loader(sc, lc, out, stop, ready):
    con = featurestore.open_store(sc)
    ready.set()
    rng = random.Random(1)
    side, n_tags, n_slots = int(sc["grid_side"]), int(sc["tags"]), int(sc["tide_slots"])
    birds, fixes = lc["birds"], lc["fixes"]
    while not stop.is_set():
        rows, labels = [], []
        for _ in range(birds):
            tag = rng.randrange(n_tags)
            x, y = rng.randrange(side), rng.randrange(side)
            slot = rng.randrange(n_slots)
            t = featurestore.tag_features(con, tag)
            for k in range(fixes):
                x = min(side - 1, max(0, x + rng.randint(-2, 2)))
                y = min(side - 1, max(0, y + rng.randint(-2, 2)))
                c = featurestore.cell_features(con, x * side + y)
                tide = featurestore.tide_features(con, (slot + k) % n_slots)
                speed = abs(rng.gauss(0, 1)) * (3.0 if c[2] < 0.2 else 1.0)
                rows.append((*c, t[0] / 750.0, t[1] / 300.0, t[2] / 8.0, t[3] / 6.0, *tide,
                             speed, math.cos(k), math.sin(k)))
                labels.append(2 if speed > 2.5 else (0 if c[1] > 0.3 or tide[0] < 0 else 1))
        batch = (torch.tensor(rows, dtype=torch.float32), torch.tensor(labels))
        while not stop.is_set():
            try:
                out.put(batch, timeout=0.2)
                break
            except queue.Full:
                continue
    con.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=DEFAULT_CONFIG)
    ap.add_argument("--steps", type=int, default=10**9)
    args = ap.parse_args()
    cfg = load_config(args.config)
    sc, lc, tr = cfg["store"], cfg["loader"], cfg["train"]

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    torch.set_num_threads(1)
    torch.manual_seed(0)

    q = queue.Queue(maxsize=tr["queue_depth"])
    ready = threading.Event()
    loader = threading.Thread(target=track_loader, name="track-loader", daemon=True,
                              args=(sc, lc, q, stop, ready))
    loader.start()
    h = tr["hidden"]
    model = nn.Sequential(nn.LayerNorm(N_FEAT), nn.Linear(N_FEAT, h), nn.GELU(), nn.Linear(h, h), nn.GELU(),
                          nn.Linear(h, h), nn.GELU(), nn.Linear(h, CLASSES))
    opt = torch.optim.AdamW(model.parameters(), lr=tr["lr"])
    step = 0
    try:
        while not stop.is_set() and step < args.steps:
            try:
                x, y = q.get(timeout=0.5)
            except queue.Empty:
                if not loader.is_alive() and not stop.is_set():
                    raise SystemExit("the track loader stopped") from None
                continue
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            print(f"step {step} loss {loss.item():.5f}", flush=True)
    finally:
        stop.set()
        loader.join(timeout=5)


if __name__ == "__main__":
    main()
