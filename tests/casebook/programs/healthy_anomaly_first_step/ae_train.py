#!/usr/bin/env python3
# Denoising autoencoder. The first optimisation step runs under anomaly detection (a one-off sanity check of the
# custom loss); the rest of training runs without it.
import time

import torch
import torch.nn as nn

torch.set_num_threads(1)
net = nn.Sequential(nn.Linear(64, 96), nn.ELU(), nn.Linear(96, 8), nn.ELU(), nn.Linear(8, 96), nn.ELU(),
                    nn.Linear(96, 64))
opt = torch.optim.Adam(net.parameters(), lr=1e-3)


def step(x):
    noisy = x + 0.1 * torch.randn_like(x)
    loss = (net(noisy) - x).pow(2).sum(dim=1).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


with torch.autograd.detect_anomaly():
    step(torch.rand(32, 64))

count, begin = 0, time.time()
while True:
    loss = step(torch.rand(32, 64))
    count += 1
    if count % 100 == 0:
        print(f"ae: {count} steps, {count / (time.time() - begin):.0f}/s, loss {loss.item():.3f}", flush=True)
