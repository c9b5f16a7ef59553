#!/usr/bin/env python3
"""Card-fraud scorer trained on a transaction stream enriched from the feature store (CPU).

A feature-store server runs as a child process (featurestore.py).  An enricher
thread reads synthetic card transactions, looks up the card and merchant
feature rows for each batch from the store and hands (features, label) batches
to the training thread through a queue.Queue; the trainer fits a cross-feature
MLP with focal loss and Adam.  Progress: `step N loss X` about once a second.

Run:   python train.py                        (client options from CLIENT_CONF)
       python train.py --tcp-nodelay 1        (client option overridden)
"""
import argparse
import multiprocessing as mp
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

from featurestore import FeatureClient, run_server

N_CARDS, N_MERCHANTS, DIM = 200_000, 20_000, 32
CLIENT_CONF = {"tcp_nodelay": 0}      # as in the production client config


class TxnStream:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.hot_cards = self.rng.integers(0, N_CARDS, 500)

    def next(self, b):
        rng = self.rng
        card = np.where(rng.random(b) < 0.1, rng.choice(self.hot_cards, b), rng.integers(0, N_CARDS, b))
        merchant = rng.zipf(1.3, b) % N_MERCHANTS
        amount = rng.lognormal(3.0, 1.2, b).astype(np.float32)
        hour = rng.integers(0, 24, b)
        dense = np.stack([np.log1p(amount), np.sin(hour / 24 * 6.283), np.cos(hour / 24 * 6.283),
                          (rng.random(b) < 0.2).astype(np.float32)], 1).astype(np.float32)
        risk = 0.6 * np.isin(card, self.hot_cards[:50]) + 0.3 * (amount > 200) + 0.2 * (hour < 5)
        label = (rng.random(b) < 0.02 + 0.5 * risk).astype(np.float32)
        return card, merchant, dense, label


class FraudNet(nn.Module):
    def __init__(self, dim=DIM, hidden=256):
        super().__init__()
        self.inp = nn.Linear(2 * dim + 4, hidden)
        self.cross = nn.Linear(2 * dim + 4, 2 * dim + 4)
        self.mlp = nn.Sequential(nn.Linear(hidden + 2 * dim + 4, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                                 nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, x):
        h = F.relu(self.inp(x))
        c = x * self.cross(x) + x
        return self.mlp(torch.cat([h, c], 1)).squeeze(1)


def focal_loss(logits, y, gamma=2.0):
    p = torch.sigmoid(logits)
    ce = F.binary_cross_entropy_with_logits(logits, y, reduction="none")
    pt = p * y + (1 - p) * (1 - y)
    return (ce * (1 - pt) ** gamma).mean()


def enricher(q, stop, args, port):
    client = FeatureClient(port, DIM, tcp_nodelay=bool(args.tcp_nodelay))
    stream = TxnStream(args.seed + 1)
    try:
        while not stop.is_set():
            card, merchant, dense, label = stream.next(args.batch)
            both = np.concatenate([card, merchant + N_CARDS])
            rows = client.lookup("card", both[: args.batch])
            mrows = client.lookup("merchant", both[args.batch:] - N_CARDS)
            x = np.concatenate([rows, mrows, dense], 1)
            item = (torch.from_numpy(x), torch.from_numpy(label))
            while not stop.is_set():
                try:
                    q.put(item, timeout=0.1)
                    break
                except queue.Full:
                    pass
    except (ConnectionError, OSError):
        if not stop.is_set():
            raise
    finally:
        try:
            client.close()
        except OSError:
            pass


def trainer(q, stop, args):
    torch.manual_seed(args.seed)
    model = FraudNet()
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    step, ema, last, last_step = 0, None, time.time(), 0
    while not stop.is_set():
        try:
            x, y = q.get(timeout=0.2)
        except queue.Empty:
            continue
        for _ in range(args.passes):
            loss = focal_loss(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        step += 1
        lv = loss.item()
        ema = lv if ema is None else 0.95 * ema + 0.05 * lv
        now = time.time()
        if now - last >= 1.0:
            print(f"step {step} loss {ema:.4f} steps/s={(step - last_step) / (now - last):.2f}", flush=True)
            last, last_step = now, step


def main():
    ap = argparse.ArgumentParser(description="fraud scorer trainer")
    ap.add_argument("--batch", type=int, default=2048)
    ap.add_argument("--passes", type=int, default=1)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--tcp-nodelay", type=int, default=CLIENT_CONF["tcp_nodelay"])
    args = ap.parse_args()
    torch.set_num_threads(1)      # one core for the trainer, the other for the enricher and the store

    ctx = mp.get_context("fork")
    port_q = ctx.Queue()
    server = ctx.Process(target=run_server, args=(port_q, N_CARDS, N_MERCHANTS, DIM), name="feature-store",
                         daemon=True)
    server.start()
    port = port_q.get(timeout=30)
    print(f"feature store up on 127.0.0.1:{port} (pid {server.pid})", flush=True)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda s, f: stop.set())
    signal.signal(signal.SIGINT, lambda s, f: stop.set())
    q = queue.Queue(maxsize=8)
    threads = [threading.Thread(target=enricher, args=(q, stop, args, port), name="enricher", daemon=True),
               threading.Thread(target=trainer, args=(q, stop, args), name="trainer", daemon=True)]
    for t in threads:
        t.start()
    while not stop.is_set():
        stop.wait(0.5)
    for t in threads:
        t.join(timeout=1.5)
    server.terminate()
    server.join(timeout=2)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
