"""Dual-encoder retrieval with mined hard negatives: query and passage towers, in-batch + hard-negative softmax.

    miner thread (stale-index candidates -> sorted hard-negative pool -> batches) --(queue)--> trainer (main thread)

usage: python train.py [--pool-profile interactive|batch] [--batch 128] [--steps N]
"""
import argparse
import queue
import signal
import threading
import time

import pool_profile
import torch
import torch.nn.functional as F
from miner import DIM, Corpus, HardNegativeMiner
from torch import nn


class Tower(nn.Module):
    def __init__(self, width=128):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(DIM, width), nn.GELU(), nn.Linear(width, width), nn.GELU(),
                                 nn.Linear(width, 64))

    def forward(self, x):
        return F.normalize(self.net(x), dim=-1)


def miner_loop(corpus, q, halt, batch):
    miner = HardNegativeMiner(corpus)
    while not halt.is_set():
        topics, pos, neg = miner.sample(batch)
        item = (torch.from_numpy(corpus.topics[topics]), torch.from_numpy(corpus.passages[pos]),
                torch.from_numpy(corpus.passages[neg]))
        while not halt.is_set():
            try:
                q.put(item, timeout=0.2)
                break
            except queue.Full:
                pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pool-profile", choices=sorted(pool_profile.LOAD_FACTORS), default="interactive")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=10_000_000)
    ap.add_argument("--lr", type=float, default=1e-3)
    args = ap.parse_args()

    pool_profile.apply(args.pool_profile)
    torch.set_num_threads(1)      # one core for the trainer, the other for the miner
    torch.manual_seed(0)
    corpus = Corpus()
    halt = threading.Event()

    def on_signal(signum, frame):
        halt.set()
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    q = queue.Queue(maxsize=8)
    th = threading.Thread(target=miner_loop, args=(corpus, q, halt, args.batch), name="negative-miner", daemon=True)
    th.start()

    qtower, ptower = Tower(), Tower()
    params = [*qtower.parameters(), *ptower.parameters()]
    opt = torch.optim.AdamW(params, lr=args.lr, foreach=True)
    step, t0, s0 = 0, time.perf_counter(), 0
    try:
        while step < args.steps:
            queries, pos, neg = q.get()
            qv = qtower(queries)
            pv = ptower(torch.cat([pos, neg]))
            logits = qv @ pv.T / 0.05
            loss = F.cross_entropy(logits, torch.arange(len(qv)))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step % 10 == 0:
                now = time.perf_counter()
                print(f"step {step} loss {loss.item():.4f} steps/s={(step - s0) / (now - t0):.1f}", flush=True)
                t0, s0 = now, step
    finally:
        halt.set()
        th.join(timeout=1)


if __name__ == "__main__":
    main()
