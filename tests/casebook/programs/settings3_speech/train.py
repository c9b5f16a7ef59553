#!/usr/bin/env python3
"""Keyword-spotting (speech commands) trainer on synthetic log-mel clips (CPU).

A keyword-spotting trainer: a loader thread owns a bank of pre-extracted
log-mel clips bucketed by duration (49/61/81 frames), applies time-shift, gain
and SpecAugment masks in numpy and hands batches (one bucket per batch, no
padding) to the training thread through a queue.Queue; the trainer fits a
TC-ResNet-style Conv1d network with AdamW.  Progress: `step N loss X` once a
second.

Hidden mechanism (planted): runtime_env.apply_cpu_runtime_env(), run before
torch is imported, exports ONEDNN_PRIMITIVE_CACHE_CAPACITY=0 and
LRU_CACHE_CAPACITY=1 -- the workaround given in PyTorch's tracker for the
"memory grows with variable input shapes" reports on mkldnn convolutions.
With oneDNN's primitive cache disabled, every Conv1d forward, backward-data and
backward-weights call re-creates its oneDNN primitive, i.e. re-runs
implementation selection and JIT code generation, on every step.  The stacks
look like ordinary aten::mkldnn_convolution / convolution_backward compute.
Healthy twin: `--primitive-cache 64` -- the cache is still bounded (and
LRU_CACHE_CAPACITY=1 is still exported), just big enough for the handful of
shapes this model uses.

Reports: pytorch/pytorch#98688 (Conv1d "leak", advice to set
ONEDNN_PRIMITIVE_CACHE_CAPACITY=0 LRU_CACHE_CAPACITY=1), pytorch/pytorch#27971
and pytorch/pytorch#32037 (mkldnn conv memory growth with varying input sizes).

Run:   python train.py                         (planted)
       python train.py --primitive-cache 64    (healthy twin)
Measured on the 2-core AMD EPYC box, A/B/A/B/A/B runs of 25 s (SIGINT),
steps/s between first and last progress line, medians of 3:
planted 78.1 steps/s, twin 138.8 steps/s (44% slower).
"""
import os
import sys

from runtime_env import apply_cpu_runtime_env

# Must run before torch creates its first oneDNN primitive.
apply_cpu_runtime_env(sys.argv)

import argparse
import queue
import signal
import threading
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

SR = 16000
N_MELS = 40
BUCKETS = (49, 61, 81)          # frames: 0.5 s, 0.62 s, 0.82 s clips
KEYWORDS = ("yes", "no", "up", "down", "left", "right", "on", "off", "stop", "go", "_silence_", "_unknown_")


def mel_filterbank(n_fft=512, n_mels=N_MELS, sr=SR):
    def hz2mel(f):
        return 2595 * np.log10(1 + f / 700.0)

    def mel2hz(m):
        return 700 * (10 ** (m / 2595.0) - 1)

    pts = mel2hz(np.linspace(hz2mel(20), hz2mel(sr / 2), n_mels + 2))
    bins = np.floor((n_fft + 1) * pts / sr).astype(int)
    fb = np.zeros((n_mels, n_fft // 2 + 1), np.float32)
    for m in range(1, n_mels + 1):
        l, c, r = bins[m - 1], bins[m], bins[m + 1]
        fb[m - 1, l:c] = (np.arange(l, c) - l) / max(c - l, 1)
        fb[m - 1, c:r] = (r - np.arange(c, r)) / max(r - c, 1)
    return fb


def synth_clip(rng, label, n):
    """Formant-like chirps whose pattern depends on the keyword."""
    t = np.arange(n) / SR
    if KEYWORDS[label] == "_silence_":
        return (rng.normal(0, 0.01, n)).astype(np.float32)
    base = 150 + 40 * (label % 4)
    f1 = 300 + 90 * label + 200 * np.sin(2 * np.pi * (0.8 + 0.3 * (label % 3)) * t)
    f2 = 1200 + 110 * label - 300 * t
    env = np.exp(-((t - t[-1] / 2 - 0.02 * rng.normal()) ** 2) / 0.02)
    x = env * (np.sin(2 * np.pi * np.cumsum(f1) / SR) + 0.5 * np.sin(2 * np.pi * np.cumsum(f2) / SR)
               + 0.3 * np.sin(2 * np.pi * base * t))
    return (x + rng.normal(0, 0.02, n)).astype(np.float32)


def logmel(x, fb, frames, n_fft=512, win=400, hop=160):
    fr = np.lib.stride_tricks.sliding_window_view(x, win)[::hop][:frames]
    spec = np.abs(np.fft.rfft(fr * np.hanning(win).astype(np.float32), n_fft)) ** 2
    return np.log(spec @ fb.T + 1e-6).T.astype(np.float32)          # (mels, frames)


class FeatureBank:
    """Pre-extracted log-mels per duration bucket; the loader thread only
    augments and batches (one bucket per batch, so no padding)."""

    def __init__(self, seed, per_class=20):
        rng = np.random.default_rng(seed)
        fb = mel_filterbank()
        self.buckets = []
        for frames in BUCKETS:
            n = (frames - 1) * 160 + 400
            feats, labels = [], []
            for lab in range(len(KEYWORDS)):
                for _ in range(per_class):
                    feats.append(logmel(synth_clip(rng, lab, n), fb, frames))
                    labels.append(lab)
            x = np.stack(feats)
            self.buckets.append(((x - x.mean()) / x.std(), np.array(labels, np.int64)))
        self.rng = rng

    def batch(self, b):
        rng = self.rng
        x_all, y_all = self.buckets[rng.integers(len(self.buckets))]
        idx = rng.integers(0, len(y_all), b)
        x = x_all[idx].copy()
        frames = x.shape[2]
        # time shift, gain, SpecAugment masks
        x = np.roll(x, int(rng.integers(-4, 5)), axis=2)
        x *= rng.uniform(0.8, 1.2, (b, 1, 1)).astype(np.float32)
        for i in range(b):
            f0 = rng.integers(0, N_MELS - 6)
            t0 = rng.integers(0, frames - 8)
            x[i, f0:f0 + rng.integers(0, 6)] = 0
            x[i, :, t0:t0 + rng.integers(0, 8)] = 0
        return x, y_all[idx]


class KWSNet(nn.Module):
    """TC-ResNet style: 1-D temporal convolutions with the mel bins as channels."""

    def __init__(self, widths=(16, 32), k=9):
        super().__init__()
        self.stem = nn.Conv1d(N_MELS, widths[0], 3, padding=1, bias=False)
        self.blocks = nn.ModuleList()
        for cin, cout in zip(widths[:-1], widths[1:]):
            self.blocks.append(nn.ModuleDict({
                "c1": nn.Conv1d(cin, cout, k, stride=2, padding=k // 2, bias=False), "b1": nn.BatchNorm1d(cout),
                "c2": nn.Conv1d(cout, cout, k, padding=k // 2, bias=False), "b2": nn.BatchNorm1d(cout),
                "sc": nn.Conv1d(cin, cout, 1, stride=2, bias=False), "bs": nn.BatchNorm1d(cout)}))
        self.drop = nn.Dropout(0.1)
        self.fc = nn.Linear(widths[-1], len(KEYWORDS))

    def forward(self, x):
        h = self.stem(x)
        for b in self.blocks:
            y = F.relu(b["b1"](b["c1"](h)))
            y = b["b2"](b["c2"](y))
            h = F.relu(y + b["bs"](b["sc"](h)))
        return self.fc(self.drop(h.mean(2)))


def loader(q, stop, args):
    bank = FeatureBank(args.seed + 1)
    while not stop.is_set():
        x, y = bank.batch(args.batch)
        item = (torch.from_numpy(x), torch.from_numpy(y))
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                break
            except queue.Full:
                pass


def trainer(q, stop, args):
    torch.manual_seed(args.seed)
    model = KWSNet()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-2, foreach=True)
    step, ema, last = 0, None, time.time()
    while not stop.is_set():
        try:
            x, y = q.get(timeout=0.2)
        except queue.Empty:
            continue
        logits = model(x)
        loss = F.cross_entropy(logits, y, label_smoothing=0.1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        step += 1
        lv = loss.item()
        ema = lv if ema is None else 0.97 * ema + 0.03 * lv
        now = time.time()
        if now - last >= 1.0:
            print(f"step {step} loss {ema:.4f}", flush=True)
            last = now


def main():
    ap = argparse.ArgumentParser(description="keyword-spotting trainer")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--primitive-cache", type=int, default=0,
                    help="ONEDNN_PRIMITIVE_CACHE_CAPACITY (read before torch starts; see runtime_env.py)")
    args = ap.parse_args()

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda s, f: stop.set())
    signal.signal(signal.SIGINT, lambda s, f: stop.set())

    q = queue.Queue(maxsize=8)
    threads = [
        threading.Thread(target=loader, args=(q, stop, args), name="feature-loader", daemon=True),
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
