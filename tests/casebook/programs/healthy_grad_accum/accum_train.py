#!/usr/bin/env python3
"""Effective batch 128 on a small box: micro-batches of 16, gradients accumulated over 8 of them."""
import time

import torch
import torch.nn as nn


class Config:
    micro_batch = 16
    accumulation_steps = 8
    lr = 3e-3
    log_every = 10  # optimizer steps


class MLPClassifier(nn.Module):
    def __init__(self, d_in=40, hidden=128, n_out=5):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Dropout(0.1), nn.Linear(hidden, hidden),
                                    nn.ReLU(), nn.Linear(hidden, n_out))

    def forward(self, x):
        return self.layers(x)


def micro_batches(cfg):
    proj = torch.randn(40, 5)
    while True:
        x = torch.randn(cfg.micro_batch, 40)
        yield x, (x @ proj).argmax(-1)


def train(cfg=Config()):
    torch.set_num_threads(1)
    model = MLPClassifier()
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    criterion = nn.CrossEntropyLoss()
    model.zero_grad(set_to_none=True)
    opt_steps, running = 0, 0.0
    for i, (x, y) in enumerate(micro_batches(cfg), start=1):
        loss = criterion(model(x), y) / cfg.accumulation_steps
        loss.backward()
        running += loss.item()
        time.sleep(0.003)
        if i % cfg.accumulation_steps == 0:
            optimizer.step()
            model.zero_grad(set_to_none=True)
            opt_steps += 1
            if opt_steps % cfg.log_every == 0:
                print(f"optimizer step {opt_steps} (micro-batch {i}) loss {running:.4f}", flush=True)
            running = 0.0


if __name__ == "__main__":
    train()
