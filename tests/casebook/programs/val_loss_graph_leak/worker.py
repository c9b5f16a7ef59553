"""Denoising autoencoder on synthetic 256-d signals, trained in one thread while a second thread tracks the
validation loss on held-out batches.

Modelled on boschresearch/Continuous-Recurrent-Units#4 ("computation graph of losses are held in memory because
of not using .item(); this eventually leads to high memory usage"), TRI-ML/packnet-sfm#51 ("detach loss before
appending it to the training output list") and rballester/tntorch#19 ("every added loss used to be a full
computational graph"). The validator forgets ``torch.no_grad()`` and the tracker stores the loss tensors
themselves: every validation loss keeps its whole graph (and the activations saved for a backward that never
comes) alive, and the process grows by megabytes a second while training goes on normally.
"""
import argparse
import os
import threading
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from metrics import MetricTracker

DIM = 256


def make_signals(n, g):
    t = torch.linspace(0, 1, DIM)
    freq = torch.rand(n, 1, generator=g) * 8 + 1
    amp = torch.rand(n, 1, generator=g) + 0.5
    return amp * torch.sin(6.2832 * freq * t)


class DAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(DIM, 512), nn.GELU(), nn.Linear(512, 128), nn.GELU())
        self.dec = nn.Sequential(nn.Linear(128, 512), nn.GELU(), nn.Linear(512, DIM))

    def forward(self, x):
        return self.dec(self.enc(x))


def rss_mb():
    with open(f"/proc/{os.getpid()}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


class TrainThread(threading.Thread):
    def __init__(self, model, tracker, lr):
        super().__init__(name="train-loop", daemon=True)
        self.model, self.tracker = model, tracker
        self.opt = torch.optim.Adam(model.parameters(), lr=lr)
        self.steps = 0

    def run(self):
        g = torch.Generator().manual_seed(0)
        while True:
            clean = make_signals(64, g)
            noisy = clean + 0.3 * torch.randn(clean.shape, generator=g)
            loss = F.mse_loss(self.model(noisy), clean)
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            self.tracker.update("train/loss", loss)
            self.steps += 1
            time.sleep(0.002)


class ValidateThread(threading.Thread):
    def __init__(self, model, tracker, every_s):
        super().__init__(name="validator", daemon=True)
        self.model, self.tracker, self.every_s = model, tracker, every_s
        g = torch.Generator().manual_seed(123)
        self.clean = make_signals(96, g)
        self.noisy = self.clean + 0.3 * torch.randn(self.clean.shape, generator=g)

    def run(self):
        while True:
            val_loss = F.mse_loss(self.model(self.noisy), self.clean)
            self.tracker.update("val/loss", val_loss)
            time.sleep(self.every_s)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--val-every", type=float, default=0.1)
    ap.add_argument("--max-rss-mb", type=float, default=3000, help="abort the job above this (the node's guard)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)

    model, tracker = DAE(), MetricTracker()
    trainer = TrainThread(model, tracker, args.lr)
    validator = ValidateThread(model, tracker, args.val_every)
    trainer.start()
    validator.start()
    t0 = time.time()
    while True:
        time.sleep(1.0)
        print(f"t={time.time() - t0:5.1f}s steps={trainer.steps} train={tracker.smoothed('train/loss'):.4f} "
              f"val={tracker.smoothed('val/loss'):.4f} n_val={tracker.count('val/loss')} rss={rss_mb():.0f}MB",
              flush=True)
        if rss_mb() > args.max_rss_mb:
            print(f"memory guard: rss above {args.max_rss_mb:.0f}MB, aborting", flush=True)
            os._exit(3)


if __name__ == "__main__":
    main()
