#!/usr/bin/env python3
"""Land-cover patch classifier trained from multispectral scene mosaics (CPU).

A land-cover patch classifier: a sampler thread cuts random 6-band 176x176
crops out of in-memory synthetic scene mosaics, applies flips/rotations,
per-sample gain/offset, sensor noise, haze and band normalisation in numpy
(about 40 MB per batch array), center-crops to 160x160 and passes the batch
through a queue.Queue to the training thread, which trains a small strided CNN
with SGD/Nesterov.  Progress: `step N loss X` once a second.

Hidden mechanism (planted): the sampler calls
memutil.configure_numpy_memory(False), i.e. numpy's process-wide
_set_madvise_hugepage(False) (the same switch as NUMPY_MADVISE_HUGEPAGE=0),
added after a reported THP-compaction stall.  numpy then stops madvising its
large (>=4 MiB) buffers with MADV_HUGEPAGE; with the kernel's THP mode at
"madvise" every fresh ~40 MB batch buffer (they are above glibc's mmap
threshold, so each one is a new mapping) is faulted in 4 KiB at a time
instead of 2 MiB at a time: ~56k minor page faults per batch instead of ~2k,
several times more system time.  The profile shows ordinary numpy ufunc
compute (plus kernel time); the producer becomes the bottleneck and the trainer
waits on the queue.
Healthy twin: `--hugepage-guard startup` -- the same call is made, but only
around building the long-lived scene cache; the previous setting is restored
before the per-batch augmentation loop.

Reports: numpy/numpy#11957 and numpy/numpy#11919 (madvise(MADV_HUGEPAGE) on
large arrays cuts page-fault overhead), numpy/numpy#31590 (report that
prompts users to turn the hint off), toggle added in numpy/numpy#15769.

Run:   python train.py                            (planted)
       python train.py --hugepage-guard startup   (healthy twin)
Measured on the 2-core AMD EPYC box (THP=madvise), A/B/A/B/A/B runs of 25 s
(SIGINT), steps/s between first and last progress line, medians of 3:
planted 4.35 steps/s, twin 7.59 steps/s (43% slower).
"""
import argparse
import os
import queue
import signal
import sys
import threading
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from memutil import configure_numpy_memory

BANDS = 6
N_CLASSES = 10
# per-band radiometric statistics of the (synthetic) sensor
BAND_MEAN = np.array([0.21, 0.24, 0.27, 0.33, 0.41, 0.30], np.float32)
BAND_STD = np.array([0.07, 0.08, 0.09, 0.11, 0.14, 0.10], np.float32)


def make_scene(rng, size=1024):
    """A synthetic scene: smooth class map + per-class spectra + texture."""
    coarse = rng.integers(0, N_CLASSES, (size // 64, size // 64))
    labels = np.kron(coarse, np.ones((64, 64), np.int64))
    spectra = rng.uniform(0.1, 0.6, (N_CLASSES, BANDS)).astype(np.float32)
    img = spectra[labels].transpose(2, 0, 1).copy()
    img += rng.normal(0, 0.03, img.shape).astype(np.float32)
    return np.ascontiguousarray(img), labels


class PatchSampler:
    def __init__(self, seed, n_scenes=3, crop=176, out=160):
        self.rng = np.random.default_rng(seed)
        self.scenes = [make_scene(self.rng) for _ in range(n_scenes)]
        self.crop, self.out = crop, out
        self.noise = (self.rng.standard_normal(1 << 23, dtype=np.float32) * 0.01)
        self.noise = np.concatenate([self.noise, self.noise, self.noise])

    def batch(self, b):
        rng, c, o = self.rng, self.crop, self.out
        s_img, s_lab = self.scenes[rng.integers(len(self.scenes))]
        ys = rng.integers(0, s_img.shape[1] - c, b)
        xs = rng.integers(0, s_img.shape[2] - c, b)
        x = np.stack([s_img[:, y:y + c, xx:xx + c] for y, xx in zip(ys, xs)])
        lab = s_lab[ys + c // 2, xs + c // 2]
        # geometric augmentation (views)
        if rng.random() < 0.5:
            x = x[:, :, :, ::-1]
        if rng.random() < 0.5:
            x = x[:, :, ::-1, :]
        x = np.rot90(x, int(rng.integers(4)), axes=(2, 3))
        # radiometric augmentation: per-sample gain/offset, sensor noise, haze
        x = x * rng.uniform(0.85, 1.15, (b, BANDS, 1, 1)).astype(np.float32)
        x += rng.uniform(-0.02, 0.02, (b, BANDS, 1, 1)).astype(np.float32)
        k = int(rng.integers(0, self.noise.size - x.size))
        x += self.noise[k:k + x.size].reshape(x.shape)   # sensor noise from a pre-drawn bank
        haze = rng.uniform(0, 0.05, (b, 1, 1, 1)).astype(np.float32)
        x *= 1 - haze
        x += haze
        x = (x - BAND_MEAN[:, None, None]) / BAND_STD[:, None, None]
        off = (c - o) // 2
        x = np.ascontiguousarray(x[:, :, off:off + o, off:off + o])
        return x, lab


class PatchNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(BANDS, 16, 5, stride=4, padding=2), nn.BatchNorm2d(16), nn.ReLU())
        self.body = nn.Sequential(
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.ReLU())
        self.head = nn.Linear(64, N_CLASSES)

    def forward(self, x):
        return self.head(self.body(self.stem(x)).mean((2, 3)))


def loader(q, stop, args):
    if args.hugepage_guard == "process":
        configure_numpy_memory(False)
        sampler = PatchSampler(args.seed + 1)
    else:  # only while the long-lived scene mosaics are materialised
        prev = configure_numpy_memory(False)
        sampler = PatchSampler(args.seed + 1)
        configure_numpy_memory(prev)
    while not stop.is_set():
        x, y = sampler.batch(args.batch)
        item = (torch.from_numpy(x), torch.from_numpy(y))
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                break
            except queue.Full:
                pass


def trainer(q, stop, args):
    torch.manual_seed(args.seed)
    model = PatchNet()
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, nesterov=True, weight_decay=5e-4)
    step, ema, last = 0, None, time.time()
    while not stop.is_set():
        try:
            x, y = q.get(timeout=0.2)
        except queue.Empty:
            continue
        loss = F.cross_entropy(model(x), y, label_smoothing=0.05)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        lv = loss.item()
        ema = lv if ema is None else 0.97 * ema + 0.03 * lv
        now = time.time()
        if now - last >= 1.0:
            print(f"step {step} loss {ema:.4f}", flush=True)
            last = now


def main():
    ap = argparse.ArgumentParser(description="land-cover patch classifier")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.02)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--hugepage-guard", choices=("process", "startup"), default="process",
                    help="where numpy's MADV_HUGEPAGE hint is switched off: for the whole "
                         "process (default) or only while the scene cache is built")
    args = ap.parse_args()

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda s, f: stop.set())
    signal.signal(signal.SIGINT, lambda s, f: stop.set())

    q = queue.Queue(maxsize=4)
    threads = [
        threading.Thread(target=loader, args=(q, stop, args), name="patch-sampler", daemon=True),
        threading.Thread(target=trainer, args=(q, stop, args), name="trainer", daemon=True),
    ]
    for t in threads:
        t.start()
    while not stop.is_set():
        stop.wait(0.5)
    for t in threads:
        t.join(timeout=1.5)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
