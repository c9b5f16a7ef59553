"""Peatland methane-flux gap filler, distilled: a small student MLP learns to reproduce a
frozen teacher's flux predictions (and quantiles) from eddy-covariance tower windows
(water-table depth, soil temperature, friction velocity, PAR, ...).

A labeller thread synthesises tower windows, runs the frozen teacher under the profile's
precision (precision.apply in that thread) and queues (window, soft targets); the main
thread trains the student.

    python train.py                                  # configs/distill_export.toml
    python train.py --config configs/distill_local.toml
"""
import argparse
import os
import queue
import signal
import threading
import tomllib

import numpy as np
import torch
from torch import nn

import precision

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CONFIG = os.path.join("configs", "distill_export.toml")
N_VARS = 6
N_OUT = 3    # flux, 10% and 90% quantiles


def load_config(path):
    for cand in (path, os.path.join(HERE, path)):
        if os.path.exists(cand):
            with open(cand, "rb") as f:
                return tomllib.load(f)
    raise SystemExit(f"config not found: {path}")


def make_teacher(n_in, h):
    torch.manual_seed(1234)
    teacher = nn.Sequential(nn.Linear(n_in, h), nn.SiLU(), nn.Linear(h, h), nn.SiLU(),
                            nn.Linear(h, h), nn.SiLU(), nn.Linear(h, N_OUT))
    for m in teacher:
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=1.6 / m.in_features ** 0.5)
    for p in teacher.parameters():
        p.requires_grad_(False)
    return teacher.eval()


def tower_windows(rng, sites, window, batch):
    """Half-hourly driver windows for a batch of (site, day) draws."""
    site = rng.integers(0, sites, size=batch)
    t = np.arange(window) / 48.0
    phase = rng.uniform(0, 2 * np.pi, size=(batch, 1))
    diurnal = np.sin(2 * np.pi * t[None, :] + phase)
    wtd = -0.05 * site[:, None] + 0.02 * np.cumsum(rng.normal(0, 0.1, (batch, window)), axis=1)
    tsoil = 8 + 4 * diurnal + rng.normal(0, 0.5, (batch, window))
    ustar = np.abs(0.3 + 0.1 * diurnal + rng.normal(0, 0.05, (batch, window)))
    par = np.clip(800 * diurnal, 0, None) + rng.normal(0, 20, (batch, window))
    tair = tsoil + 3 * diurnal + rng.normal(0, 1.0, (batch, window))
    vpd = np.clip(0.1 * (tair - 5), 0, None)
    x = np.stack([wtd, tsoil / 10, ustar, par / 500, tair / 10, vpd], axis=1)
    x = (x - x.mean(axis=2, keepdims=True)) / (x.std(axis=2, keepdims=True) + 1e-3)
    return torch.from_numpy(x.reshape(batch, -1).astype(np.float32))


def labeller(cfg, out, stop):
    torch.set_num_threads(1)
    precision.apply(cfg["teacher"])
    tw = cfg["tower"]
    teacher = make_teacher(N_VARS * tw["window"], cfg["teacher"]["hidden"])
    rng = np.random.default_rng(7)
    with torch.no_grad():
        while not stop.is_set():
            x = tower_windows(rng, tw["sites"], tw["window"], tw["batch_size"])
            y = teacher(x).float()
            while not stop.is_set():
                try:
                    out.put((x, y), timeout=0.2)
                    break
                except queue.Full:
                    continue


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=DEFAULT_CONFIG)
    ap.add_argument("--steps", type=int, default=10**9)
    args = ap.parse_args()
    cfg = load_config(args.config)
    tw, tr = cfg["tower"], cfg["train"]

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    q = queue.Queue(maxsize=tr["queue_depth"])
    lab = threading.Thread(target=labeller, name="teacher-labeller", daemon=True,
                           args=(cfg, q, stop))
    lab.start()

    torch.set_num_threads(1)
    precision.apply(cfg["student"])
    torch.manual_seed(0)
    n_in, h = N_VARS * tw["window"], cfg["student"]["hidden"]
    student = nn.Sequential(nn.Linear(n_in, h), nn.SiLU(), nn.Linear(h, h), nn.SiLU(),
                            nn.Linear(h, N_OUT))
    opt = torch.optim.AdamW(student.parameters(), lr=tr["lr"])
    step = 0
    while not stop.is_set() and step < args.steps:
        try:
            x, y = q.get(timeout=0.5)
        except queue.Empty:
            continue
        loss = nn.functional.smooth_l1_loss(student(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        print(f"step {step} loss {loss.item():.5f}", flush=True)
    stop.set()
    lab.join(timeout=5)


if __name__ == "__main__":
    main()
