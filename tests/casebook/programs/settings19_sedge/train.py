"""Sedge species-group classifier for a herbarium digitisation network: a small CNN
trained on specimen-sheet thumbnails read from the upload spool.

An on-access scanner (child process, scanner.py) watches the spool with the profile's
policy; a loader thread opens each specimen file, checks and normalises the image and
batches them; the main thread trains the CNN.

    python train.py                                    # configs/herbarium_enforce.toml
    python train.py --config configs/herbarium_audit.toml
"""
import argparse
import os
import queue
import random
import signal
import struct
import subprocess
import sys
import threading
import tomllib

import numpy as np
import torch
from torch import nn

import spool

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CONFIG = os.path.join("configs", "herbarium_enforce.toml")


def load_config(path):
    for cand in (path, os.path.join(HERE, path)):
        if os.path.exists(cand):
            with open(cand, "rb") as f:
                return tomllib.load(f)
    raise SystemExit(f"config not found: {path}")


def start_scanner(spool_dir, mode):
    proc = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "scanner.py"), "--parent", str(os.getpid()),
         "--spool", spool_dir, "--mode", mode],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()
    if line != "ready":
        print(f"scanner: {line or 'no answer'}", file=sys.stderr)
    return proc


def load_specimen(path):
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:4] != b"HRBM":
        raise ValueError(f"not a specimen file: {path}")
    h, w = struct.unpack_from("<II", raw, 4)
    img = np.frombuffer(raw, dtype=np.uint8, offset=16).reshape(h, w, 3)
    x = img.astype(np.float32).transpose(2, 0, 1) / 255.0
    return (x - x.mean(axis=(1, 2), keepdims=True)) / (x.std(axis=(1, 2), keepdims=True) + 1e-3)


def loader(items, batch, out, stop, seed=0):
    rng = random.Random(seed)
    while not stop.is_set():
        picks = rng.sample(items, batch)
        xs = np.stack([load_specimen(p) for p, _ in picks])
        if rng.random() < 0.5:
            xs = xs[..., ::-1]
        item = (torch.from_numpy(np.ascontiguousarray(xs)),
                torch.tensor([lab for _, lab in picks]))
        while not stop.is_set():
            try:
                out.put(item, timeout=0.2)
                break
            except queue.Full:
                continue


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=DEFAULT_CONFIG)
    ap.add_argument("--steps", type=int, default=10**9)
    args = ap.parse_args()
    cfg = load_config(args.config)
    sp, tr = cfg["spool"], cfg["train"]

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    spool.sweep_stale()
    run_dir, spool_dir, items = spool.build(sp["specimens"], sp["size"])
    scanner = start_scanner(spool_dir, cfg["scanner"]["mode"])
    try:
        q = queue.Queue(maxsize=tr["queue_depth"])
        threading.Thread(target=loader, name="specimen-loader", daemon=True,
                         args=(items, tr["batch_size"], q, stop)).start()

        torch.set_num_threads(1)
        torch.manual_seed(0)
        h = tr["hidden"]
        model = nn.Sequential(
            nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(4), nn.Flatten(),
            nn.Linear(16 * 16, h), nn.ReLU(), nn.Linear(h, spool.SPECIES))
        opt = torch.optim.AdamW(model.parameters(), lr=tr["lr"])
        step = 0
        while not stop.is_set() and step < args.steps:
            try:
                x, y = q.get(timeout=0.5)
            except queue.Empty:
                continue
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            print(f"step {step} loss {loss.item():.5f}", flush=True)
    finally:
        stop.set()
        if scanner.poll() is None:
            scanner.terminate()
            try:
                scanner.wait(timeout=3)
            except subprocess.TimeoutExpired:
                scanner.kill()
                scanner.wait()
        spool.remove(run_dir)


if __name__ == "__main__":
    main()
