"""Gearbox bearing-fault classifier for wind-turbine condition monitoring.

Featurizer threads calibrate raw int16 accelerometer windows (three axes), compute
envelope and band-energy features, and hand batches to the main thread through a
queue; the main thread trains a small MLP over five fault classes.

    python train.py                                      # configs/gateway_edge.toml
    python train.py --config configs/gateway_rack.toml
"""
import argparse
import os
import queue
import signal
import threading
import time
import tomllib

import numpy as np
import torch
from torch import nn

import gearbox
import numerics

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CONFIG = os.path.join("configs", "gateway_edge.toml")


def load_config(path):
    for cand in (path, os.path.join(HERE, path)):
        if os.path.exists(cand):
            with open(cand, "rb") as f:
                return tomllib.load(f)
    raise SystemExit(f"config not found: {path}")


def featurize(raw, gain, offset, n_bands):
    """raw: (B, 3, L) int16 counts -> (B, 4 * n_bands + 15) float32 features."""
    b, axes, length = raw.shape
    # moments straight from the int16 counts, accumulated in float32
    dc = np.mean(raw, axis=2, dtype=np.float32)
    power = np.mean(np.square(raw, dtype=np.float32), axis=2)
    rms = np.sqrt(np.maximum(power - np.square(dc), 0.0)) * gain[None, :]
    mag = np.abs(np.subtract(raw, dc[..., None], dtype=np.float32))
    peak = mag.max(axis=2) * gain[None, :]
    crest = peak / (rms + 1e-6)
    # first difference emphasises the bearing's high-frequency bursts
    hi = np.subtract(raw[:, :, 1:], raw[:, :, :-1], dtype=np.float32)
    hi2 = np.square(hi)
    kurt = np.mean(np.square(hi2), axis=2) / (np.square(np.mean(hi2, axis=2)) + 1e-6)
    jerk = np.mean(np.abs(hi), axis=2) * gain[None, :]
    # envelope spectrum: rectified signal in 16-sample blocks, then a short FFT
    env = mag.reshape(b, axes, length // 16, 16).mean(axis=3)
    env -= env.mean(axis=2, keepdims=True)
    spec = np.abs(np.fft.rfft(env, axis=2))[:, :, 1:]
    spec = spec[:, :, :n_bands * (spec.shape[2] // n_bands)]
    bands = np.log1p(spec.reshape(b, axes, n_bands, -1).mean(axis=3) * gain[None, :, None])
    feats = np.concatenate([bands, rms[..., None], peak[..., None], crest[..., None],
                            np.log1p(kurt)[..., None], jerk[..., None]], axis=2)
    # order spectrum of the radial axis at full resolution (gear-mesh harmonics)
    radial = raw[:, 0].astype(np.float32) * gain[0]
    order = np.abs(np.fft.rfft(radial * np.hanning(length).astype(np.float32), axis=1))
    order = order[:, 1:1 + n_bands * 32].reshape(b, n_bands, 32).max(axis=2)
    return np.concatenate([feats.reshape(b, -1), np.log1p(order)], axis=1).astype(np.float32)


def featurizer(wid, archive, cfg, out, stop):
    numerics.apply(cfg["numerics"])
    raw, labels, gain, offset = archive
    rng = np.random.default_rng(100 + wid)
    b = cfg["train"]["batch_size"]
    while not stop.is_set():
        idx = rng.integers(0, raw.shape[0], b)
        shift = int(rng.integers(0, 64))
        x = featurize(np.roll(raw[idx], shift, axis=2), gain, offset, cfg["feed"]["bands"])
        item = (torch.from_numpy(x), torch.from_numpy(labels[idx]))
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
    feed, tr = cfg["feed"], cfg["train"]

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    numerics.apply(cfg["numerics"])  # the main thread's own numpy work (archive build)
    archive = gearbox.make_archive(feed["windows"], feed["length"])
    q = queue.Queue(maxsize=tr["queue_depth"])
    workers = [threading.Thread(target=featurizer, name=f"featurizer-{i}", daemon=True,
                                args=(i, archive, cfg, q, stop))
               for i in range(feed["featurizers"])]
    for w in workers:
        w.start()

    torch.set_num_threads(1)
    torch.manual_seed(0)
    n_in = 3 * (feed["bands"] + 5) + feed["bands"]
    h = tr["hidden"]
    model = nn.Sequential(nn.LayerNorm(n_in), nn.Linear(n_in, h), nn.GELU(),
                          nn.Linear(h, h), nn.GELU(), nn.Linear(h, len(gearbox.FAULTS)))
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
    stop.set()


if __name__ == "__main__":
    main()
