"""Compiled with mode='reduce-overhead' for CUDA graphs; the step keeps a running statistic in place."""
import argparse

import torch
from torch import nn


def run(device):
    model = nn.Sequential(nn.Linear(1024, 1024), nn.GELU(), nn.Linear(1024, 1024)).to(device)
    running = torch.zeros(1024, device=device)

    @torch.compile(mode="reduce-overhead")
    def forward(x, stat):
        y = model(x)
        stat.mul_(0.9).add_(y.mean(0), alpha=0.1)  # in-place update of an input
        return y

    step = 0
    while True:
        with torch.no_grad():
            y = forward(torch.randn(256, 1024, device=device), running)
        step += 1
        if step % 50 == 0:
            print(f"inference step {step} {float(y.mean()):.3f}", flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    run(a.device)  # CUDA graph trees want the main thread (torch < 2.13)
