#!/usr/bin/env python
"""Digit classifier with elastic-distortion augmentation in a multiprocessing worker.

Settings come from the environment (our scheduler passes everything that way): DIGITS_BATCH, DIGITS_LR.
"""
import multiprocessing
import os
import time

import torch
import torch.nn.functional as F

import augmentations

BATCH = int(os.environ.get("DIGITS_BATCH", "48"))
LR = float(os.environ.get("DIGITS_LR", "0.05"))


class LeNetish(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 8, 5)
        self.fc = torch.nn.Linear(8 * 12 * 12, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv(x)), 2)
        return self.fc(x.flatten(1))


def main():
    torch.set_num_threads(1)
    model = LeNetish()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(processes=1) as pool:
        step, started = 0, time.time()
        while True:
            rows = pool.apply(augmentations.make_augmented_batch, (step, BATCH))
            x = torch.tensor(rows).view(BATCH, 1, augmentations.SIDE, augmentations.SIDE)
            y = torch.randint(0, 10, (BATCH,))
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if step % 10 == 0:
                print(f"step={step} rate={step / (time.time() - started):.1f}/s loss={loss.item():.3f}", flush=True)


if __name__ == "__main__":
    main()
