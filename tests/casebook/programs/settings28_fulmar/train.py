"""Behaviour classifier for fulmar foraging trips (GPS speed/heading + TDR depth), trained on synthetic trips.

The colony dashboard wants to see where the trainer spends its time, so the run carries an in-process stack
sampler (stacksampler.WallSampler) configured by the profile's [profiling] table."""
import argparse
import faulthandler
import gc
import os
import shutil
import signal
import sys
import tempfile
import time
import tomllib

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import stacksampler
import tracks


class ResBlock(nn.Module):
    def __init__(self, ch, k, dil):
        super().__init__()
        self.conv1 = nn.Conv1d(ch, ch, k, padding=dil * (k // 2), dilation=dil)
        self.norm1 = nn.GroupNorm(8, ch)
        self.conv2 = nn.Conv1d(ch, ch, 1)
        self.norm2 = nn.GroupNorm(8, ch)

    def forward(self, x):
        h = F.gelu(self.norm1(self.conv1(x)))
        return x + self.norm2(self.conv2(h))


class DiveNet(nn.Module):
    def __init__(self, in_ch, width, blocks, n_classes):
        super().__init__()
        self.stem = nn.Conv1d(in_ch, width, 7, padding=3)
        self.blocks = nn.ModuleList([ResBlock(width, 5, 2 ** (i % 4)) for i in range(blocks)])
        self.attn = nn.Linear(width, 1)
        self.head = nn.Sequential(nn.Linear(width, width), nn.GELU(), nn.Linear(width, n_classes))

    def forward(self, x):
        h = self.stem(x)
        for b in self.blocks:
            h = b(h)
        h = h.transpose(1, 2)
        w = torch.softmax(self.attn(h).squeeze(-1), dim=1)
        pooled = (h * w.unsqueeze(-1)).sum(1)
        return self.head(pooled)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/colony_routine.toml")
    args = ap.parse_args()
    with open(args.config, "rb") as f:
        cfg = tomllib.load(f)

    scratch = tempfile.mkdtemp(prefix="fulmar-")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    prof, run, data = cfg["profiling"], cfg["train"], cfg["tracks"]

    torch.manual_seed(run["seed"])
    torch.set_num_threads(run["threads"])
    sys.setswitchinterval(run["switch_interval_s"])
    faulthandler.enable()
    faulthandler.dump_traceback_later(prof["hang_dump_s"], repeat=True,
                                      file=open(os.path.join(scratch, "hang.txt"), "w"))

    model = DiveNet(6, run["width"], run["blocks"], len(tracks.BEHAVIOURS))
    opt = torch.optim.AdamW(model.parameters(), lr=run["lr"], weight_decay=0.01)
    feeder = tracks.TrackFeeder(data["batch"], data["length"], data["prefetch"], data["seed"])

    sampler = None
    if prof["enabled"]:
        sampler = stacksampler.WallSampler(prof["interval_ms"], prof["max_depth"], prof["flush_s"], scratch,
                                           cfg["name"])
        signal.signal(signal.SIGUSR1, lambda *_: sampler.flush())
    gc.collect()
    gc.freeze()
    feeder.start()
    if sampler is not None:
        sampler.start()
    try:
        step = 0
        ema = None
        while True:
            xs, labels = feeder.q.get()
            x = torch.from_numpy(xs)
            y = torch.from_numpy(labels).long()
            logits = model(x)
            loss = F.cross_entropy(logits, y, label_smoothing=0.05)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            acc = (logits.argmax(1) == y).float().mean().item()
            ema = acc if ema is None else 0.95 * ema + 0.05 * acc
            print(f"step {step} loss {loss.item():.4f} acc {ema:.3f}", flush=True)
            step += 1
    finally:
        if sampler is not None:
            sampler.stop()
        feeder.stop.set()
        faulthandler.cancel_dump_traceback_later()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
