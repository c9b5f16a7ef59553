#!/usr/bin/env python
# train_mlp.py -- a deep residual MLP on synthetic data, with live weight histograms for the dashboard.
import argparse
import math
import threading
import time

import torch
import torch.nn as nn

LATEST_HISTOGRAMS = {}


def make_model(width, depth):
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.LayerNorm(width), nn.GELU()]
    return nn.Sequential(*layers, nn.Linear(width, 1))


def weight_histogram(values, bins=64):
    lo, hi = min(values), max(values)
    scale = (bins - 1) / (hi - lo) if hi > lo else 0.0
    counts = [0] * bins
    for v in values:
        counts[int((v - lo) * scale)] += 1
    return lo, hi, counts


def watch_weights(model, every_s):
    # Snapshot every weight and refresh its histogram, so the dashboard never shows stale numbers.
    while True:
        for name, p in model.named_parameters():
            values = p.detach().clone().flatten().tolist()
            LATEST_HISTOGRAMS[name] = weight_histogram(values)
        time.sleep(every_s)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--hist-every", type=float, default=0.1)
    ap.add_argument("--no-hist", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    model = make_model(args.width, args.depth)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
    if not args.no_hist:
        threading.Thread(target=watch_weights, args=(model, args.hist_every), name="weight-watch",
                         daemon=True).start()
    step, t0 = 0, time.perf_counter()
    while True:
        x = torch.randn(32, args.width)
        y = x.sum(-1, keepdim=True).div(math.sqrt(args.width))
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        if step % 100 == 0:
            print(f"it {step} {step / (time.perf_counter() - t0):.0f} it/s loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
