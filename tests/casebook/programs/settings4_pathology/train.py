#!/usr/bin/env python3
"""Tumour-vs-normal patch classifier on H&E-like tiles stored in shard files (CPU).

At start-up the tile shards are built once into a dataset cache directory
(synthetic H&E-like tiles: pink stroma, purple nuclei, denser and larger
nuclei on tumour slides) and their checksums verified.  A loader thread
samples random tiles from the shards (tilestore.py), applies flips, rot90 and
a stain jitter in numpy and hands batches to the training thread through a
queue.Queue; the trainer fits a small CNN with SGD+momentum.  Progress:
`step N loss X` about once a second.

Run:   python train.py                        (shard access policy "stream")
       python train.py --access cached
"""
import argparse
import json
import os
import queue
import signal
import sys
import tempfile
import threading
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from tilestore import TILE, TileShard, write_shard

N_SHARDS, PER_SHARD, SLIDES_PER_SHARD = 4, 4096, 32
CACHE_DIR = os.path.join(tempfile.gettempdir(), "he_tile_shards_v1")


def synth_tiles(rng, n, tumour):
    h, w, _ = TILE
    yy, xx = np.mgrid[:h, :w]
    img = np.empty((n, h, w, 3), np.float32)
    img[:] = np.array([0.93, 0.72, 0.80], np.float32)            # stroma (eosin)
    img += rng.normal(0, 0.04, (n, h, w, 1)).astype(np.float32)
    n_nuc = 9 if tumour else 4
    r = 3.2 if tumour else 2.2
    for _ in range(n_nuc):
        cy = rng.uniform(0, h, (n, 1, 1))
        cx = rng.uniform(0, w, (n, 1, 1))
        rr = r * rng.uniform(0.7, 1.3, (n, 1, 1))
        m = ((yy - cy) ** 2 + (xx - cx) ** 2 < rr ** 2)[..., None]
        img = np.where(m, np.array([0.35, 0.22, 0.55], np.float32), img)   # haematoxylin
    return (np.clip(img, 0, 1) * 255).astype(np.uint8)


def build_cache(seed):
    os.makedirs(CACHE_DIR, exist_ok=True)
    manifest_path = os.path.join(CACHE_DIR, "manifest.json")
    if os.path.exists(manifest_path):
        with open(manifest_path) as f:
            manifest = json.load(f)
        if all(os.path.exists(os.path.join(CACHE_DIR, s["file"])) for s in manifest["shards"]):
            return manifest
    rng = np.random.default_rng(seed)
    shards = []
    for s in range(N_SHARDS):
        slides = np.repeat(np.arange(SLIDES_PER_SHARD) + s * SLIDES_PER_SHARD, PER_SHARD // SLIDES_PER_SHARD)
        labels = (slides % 3 == 0).astype(np.uint8)
        tiles = np.empty((PER_SHARD, *TILE), np.uint8)
        for lab in (0, 1):
            sel = np.flatnonzero(labels == lab)
            tiles[sel] = synth_tiles(rng, len(sel), bool(lab))
        name = f"shard-{s:03d}.tiles"
        digest = write_shard(os.path.join(CACHE_DIR, name), tiles, slides, labels)
        shards.append({"file": name, "n": PER_SHARD, "sha1": digest})
    manifest = {"shards": shards}
    with open(manifest_path, "w") as f:
        json.dump(manifest, f)
    return manifest


class PatchNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 6, 3, stride=2, padding=1)
        self.c2 = nn.Conv2d(6, 16, 3, stride=2, padding=1)
        self.c3 = nn.Conv2d(16, 24, 3, stride=2, padding=1)
        self.fc = nn.Linear(24, 2)

    def forward(self, x):
        x = F.relu(self.c1(x))
        x = F.relu(self.c2(x))
        x = F.relu(self.c3(x))
        return self.fc(x.mean((2, 3)))


def loader(q, stop, args, shards):
    rng = np.random.default_rng(args.seed + 1)
    b = args.batch
    tiles = np.empty((b, *TILE), np.uint8)
    slide = np.empty(b, np.int64)
    label = np.empty(b, np.int64)
    mean = np.array([0.8, 0.6, 0.72], np.float32)
    while not stop.is_set():
        which = rng.integers(0, len(shards), b)
        for s, shard in enumerate(shards):
            sel = np.flatnonzero(which == s)
            idx = np.sort(rng.integers(0, shard.n, len(sel)))
            t, sl, lb = tiles[sel], slide[sel], label[sel]
            shard.read(idx, t, sl, lb)
            tiles[sel], slide[sel], label[sel] = t, sl, lb
        x = tiles.astype(np.float32) / 255.0
        if rng.random() < 0.5:
            x = x[:, :, ::-1]
        x = np.rot90(x, int(rng.integers(4)), axes=(1, 2))
        x = x * rng.uniform(0.9, 1.1, (b, 1, 1, 3)).astype(np.float32) - mean
        item = (torch.from_numpy(np.ascontiguousarray(x.transpose(0, 3, 1, 2))), torch.from_numpy(label.copy()))
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                break
            except queue.Full:
                pass


def trainer(q, stop, args):
    torch.manual_seed(args.seed)
    model = PatchNet()
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)
    step, ema, last, last_step = 0, None, time.time(), 0
    while not stop.is_set():
        try:
            x, y = q.get(timeout=0.2)
        except queue.Empty:
            continue
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        lv = loss.item()
        ema = lv if ema is None else 0.95 * ema + 0.05 * lv
        now = time.time()
        if now - last >= 1.0:
            print(f"step {step} loss {ema:.4f} steps/s={(step - last_step) / (now - last):.2f}", flush=True)
            last, last_step = now, step


def main():
    ap = argparse.ArgumentParser(description="H&E patch classifier")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--lr", type=float, default=0.02)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--access", default="stream", choices=("stream", "cached"),
                    help="shard access policy (see tilestore.py)")
    args = ap.parse_args()
    torch.set_num_threads(1)      # the other core decodes and augments

    t0 = time.time()
    manifest = build_cache(args.seed)
    shards = [TileShard(os.path.join(CACHE_DIR, s["file"]), args.access) for s in manifest["shards"]]
    for shard, meta in zip(shards, manifest["shards"]):
        if shard.checksum() != meta["sha1"]:
            raise SystemExit(f"checksum mismatch in {shard.path}; delete {CACHE_DIR} to rebuild")
    print(f"{sum(s.n for s in shards)} tiles in {len(shards)} shards ready in {time.time() - t0:.1f}s "
          f"(access {args.access})", flush=True)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda s, f: stop.set())
    signal.signal(signal.SIGINT, lambda s, f: stop.set())
    q = queue.Queue(maxsize=6)
    threads = [threading.Thread(target=loader, args=(q, stop, args, shards), name="tile-loader", daemon=True),
               threading.Thread(target=trainer, args=(q, stop, args), name="trainer", daemon=True)]
    for t in threads:
        t.start()
    while not stop.is_set():
        stop.wait(0.5)
    for t in threads:
        t.join(timeout=1.5)
    for s in shards:
        s.close()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
