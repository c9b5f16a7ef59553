#!/usr/bin/env python3
"""Masked-nucleotide pre-training of a small DNA transformer (CPU).

A sampler thread draws windows from a synthetic genome (background sequence
with planted promoter-like motifs and tandem repeats), tokenises them into
overlapping 3-mers, applies BERT-style masking in numpy and hands batches to
the training thread through a queue.Queue.  The trainer fits a pre-norm causal-
free transformer encoder with AdamW.  A progress line `step N loss X` is
printed about once a second.

Run:   python train.py                          (numerics profile "golden")
       python train.py --numerics check         (parity check at start-up only)
"""
import argparse
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

from numerics import apply_numerics_profile

BASES = np.frombuffer(b"ACGT", dtype=np.uint8)
K = 3
VOCAB = 4 ** K + 2          # k-mers + [PAD]=64 + [MASK]=65
MASK_ID = 4 ** K + 1
MOTIFS = ("TATAAA", "CCAAT", "GGGCGG", "CACGTG", "TTGACA")


class Genome:
    def __init__(self, length, seed):
        rng = np.random.default_rng(seed)
        seq = rng.choice(4, size=length, p=(0.3, 0.2, 0.2, 0.3)).astype(np.uint8)
        for _ in range(length // 400):
            m = MOTIFS[rng.integers(len(MOTIFS))]
            pos = rng.integers(0, length - len(m))
            seq[pos:pos + len(m)] = np.searchsorted(BASES, np.frombuffer(m.encode(), np.uint8))
        for _ in range(length // 5000):       # tandem repeats
            unit = rng.integers(0, 4, rng.integers(2, 7)).astype(np.uint8)
            pos = rng.integers(0, length - 200)
            rep = np.tile(unit, 200 // len(unit) + 1)[:200]
            seq[pos:pos + 200] = rep
        self.seq = seq
        self.rng = rng

    def batch(self, b, tokens):
        span = tokens + K - 1
        starts = self.rng.integers(0, len(self.seq) - span, b)
        win = self.seq[starts[:, None] + np.arange(span)]
        ids = np.zeros((b, tokens), np.int64)
        for j in range(K):
            ids = ids * 4 + win[:, j:j + tokens]
        labels = np.full_like(ids, -100)
        sel = self.rng.random(ids.shape) < 0.15
        labels[sel] = ids[sel]
        roll = self.rng.random(ids.shape)
        inp = ids.copy()
        inp[sel & (roll < 0.8)] = MASK_ID
        rnd = sel & (roll >= 0.8) & (roll < 0.9)
        inp[rnd] = self.rng.integers(0, 4 ** K, rnd.sum())
        return inp, labels


class Block(nn.Module):
    def __init__(self, d, heads, ff):
        super().__init__()
        self.heads = heads
        self.n1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.n2 = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, ff), nn.GELU(), nn.Linear(ff, d))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.n1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.ff(self.n2(x))


class DNAEncoder(nn.Module):
    def __init__(self, d=64, heads=4, layers=2, ff=128, max_len=1024):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, d)
        self.pos = nn.Embedding(max_len, d)
        self.blocks = nn.ModuleList(Block(d, heads, ff) for _ in range(layers))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, 4 ** K)

    def forward(self, ids):
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1]))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x))


def sampler(q, stop, args):
    genome = Genome(2_000_000, args.seed + 1)
    while not stop.is_set():
        inp, lab = genome.batch(args.batch, args.tokens)
        item = (torch.from_numpy(inp), torch.from_numpy(lab))
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                break
            except queue.Full:
                pass


def trainer(q, stop, args):
    torch.manual_seed(args.seed)
    model = DNAEncoder()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    step, ema, last, last_step = 0, None, time.time(), 0
    while not stop.is_set():
        try:
            inp, lab = q.get(timeout=0.2)
        except queue.Empty:
            continue
        logits = model(inp)
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), lab.view(-1), ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        lv = loss.item()
        ema = lv if ema is None else 0.95 * ema + 0.05 * lv
        now = time.time()
        if now - last >= 1.0:
            print(f"step {step} loss {ema:.4f} steps/s={(step - last_step) / (now - last):.2f}", flush=True)
            last, last_step = now, step


def main():
    ap = argparse.ArgumentParser(description="DNA masked-token pre-training")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--numerics", default="golden", choices=("golden", "check"),
                    help="numerics profile (see numerics.py)")
    args = ap.parse_args()
    info = apply_numerics_profile(args.numerics)
    print(f"numerics profile {args.numerics}: {info}", flush=True)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda s, f: stop.set())
    signal.signal(signal.SIGINT, lambda s, f: stop.set())
    q = queue.Queue(maxsize=6)
    threads = [threading.Thread(target=sampler, args=(q, stop, args), name="genome-sampler", daemon=True),
               threading.Thread(target=trainer, args=(q, stop, args), name="trainer", daemon=True)]
    for t in threads:
        t.start()
    while not stop.is_set():
        stop.wait(0.5)
    for t in threads:
        t.join(timeout=1.5)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
