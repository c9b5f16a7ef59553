#!/usr/bin/env python3
"""Molecular property regression with a small message-passing network (CPU).

A featuriser thread builds batches of random small molecules (padded atom
features and bond adjacency, numpy) and queues them; the training thread
fits a 4-layer message-passing network (atom -> bond -> atom updates, gated
readout) with Adam.  Progress: `step N loss X steps/s=Y` every 100 steps.

Run:   python train.py
       python train.py --device-scope build
"""
import argparse
import queue
import signal
import sys
import threading
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from devices import place

BATCH, ATOMS, FEAT, HID, LAYERS = 8, 16, 16, 32, 6


class MPLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.msg = nn.Linear(HID, HID)
        self.upd = nn.Linear(2 * HID, HID)
        self.norm = nn.LayerNorm(HID)

    def forward(self, h, adj, mask):
        m = torch.bmm(adj, self.msg(h)) / adj.sum(-1, keepdim=True).clamp_min(1.0)
        h = h + F.silu(self.upd(torch.cat([h, m], -1)))
        return self.norm(h) * mask


class MPNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(FEAT, HID)
        self.layers = nn.ModuleList(MPLayer() for _ in range(LAYERS))
        self.gate = nn.Linear(HID, 1)
        self.out = nn.Sequential(nn.Linear(HID, HID), nn.SiLU(), nn.Linear(HID, 1))

    def forward(self, x, adj, n_atoms):
        mask = (torch.arange(ATOMS).unsqueeze(0) < n_atoms.unsqueeze(1)).unsqueeze(-1).float()
        h = self.embed(x) * mask
        for layer in self.layers:
            h = layer(h, adj, mask)
        w = torch.sigmoid(self.gate(h)) * mask
        return self.out((w * h).sum(1)).squeeze(-1)


def featuriser(q, stop):
    rng = np.random.default_rng(0)
    while not stop.is_set():
        n = rng.integers(6, ATOMS + 1, size=BATCH)
        x = np.zeros((BATCH, ATOMS, FEAT), np.float32)
        adj = np.zeros((BATCH, ATOMS, ATOMS), np.float32)
        for b in range(BATCH):
            kinds = rng.integers(0, FEAT, size=n[b])
            x[b, np.arange(n[b]), kinds] = 1.0
            child = np.arange(1, n[b])
            parent = (rng.random(n[b] - 1) * child).astype(np.int64)     # random spanning tree
            adj[b, child, parent] = adj[b, parent, child] = 1.0
        y = (x[:, :, :4].sum((1, 2)) * 0.3 + adj.sum((1, 2)) * 0.05 - n * 0.1).astype(np.float32)
        item = (torch.from_numpy(x), torch.from_numpy(adj), torch.from_numpy(n), torch.from_numpy(y))
        while not stop.is_set():
            try:
                q.put(item, timeout=0.5)
                break
            except queue.Full:
                pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--device-scope", default="process", choices=("process", "build"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    with place(args.device, args.device_scope):
        model = MPNN()
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        ema = [p.detach().clone() for p in model.parameters()]     # weight EMA for evaluation

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: (stop.set(), sys.exit(0)))
    q = queue.Queue(maxsize=16)
    threading.Thread(target=featuriser, args=(q, stop), name="featuriser", daemon=True).start()

    step, t_last, s_last = 0, time.time(), 0
    try:
        while True:
            x, adj, n, y = q.get()
            loss = F.mse_loss(model(x, adj, n), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            with torch.no_grad():
                for e, p in zip(ema, model.parameters()):
                    e.mul_(0.995).add_(p, alpha=0.005)
            step += 1
            if step % 100 == 0:
                now = time.time()
                print(f"step {step} loss {loss.item():.4f} steps/s={(step - s_last) / (now - t_last):.2f}", flush=True)
                t_last, s_last = now, step
    finally:
        stop.set()


if __name__ == "__main__":
    main()
