#!/usr/bin/env python3
"""FT-Transformer credit-default trainer (streaming, CPU).

A streaming tabular trainer: a loader thread draws synthetic credit-application
rows (numeric + categorical, numpy), standardises them and feeds batches through
a queue.Queue to the training thread, which trains an FT-Transformer (feature
tokenizer, 3 pre-LN transformer blocks with GELU-gated FFNs, CLS head) with
AdamW + warm-up.  Progress: one `step N loss X` line per second.

Hidden mechanism (planted): before importing torch the script sets
ATEN_CPU_CAPABILITY from `--kernel-isa`, whose default is "default" -- the
author pins ATen to the baseline (non-AVX) kernel build so exported scorecards
are bit-identical on the oldest scoring nodes.  ATen's CPU dispatcher then runs
the scalar "DEFAULT" variants of every vectorised kernel (GELU, softmax,
sigmoid, LayerNorm, the AdamW element-wise updates, reductions...) instead of
the AVX2 ones on this machine; the MKL GEMMs are unaffected, so a stack trace
just shows the usual aten ops, only slower.  Only the environment (and
torch.backends.cpu.get_cpu_capability() == "DEFAULT") gives it away.
Healthy twin: `--kernel-isa avx2` -- the same env var is still pinned, but to
the level this machine would pick anyway.

Reports: pytorch/pytorch#155552 (pinning ATEN_CPU_CAPABILITY for
cross-machine reproducibility), pytorch/pytorch#59186 (what
ATEN_CPU_CAPABILITY / the default kernels are), pytorch/pytorch#80252
(per-ISA ATen kernels change training speed, switched via the env var).

Run:   python train.py                      (planted)
       python train.py --kernel-isa avx2    (healthy twin)
Measured on the 2-core AMD EPYC box, A/B/A/B/A/B runs of 25 s (SIGINT),
steps/s between first and last progress line, medians of 3:
planted 9.95 steps/s, twin 16.87 steps/s (41% slower).
"""
import os
import sys


def _early_flag(name, default):
    # Must be read before torch is imported: ATen picks its kernel ISA once, at
    # import time, from the environment.
    for i, a in enumerate(sys.argv):
        if a == name and i + 1 < len(sys.argv):
            return sys.argv[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return default


# Scoring runs on a mixed fleet (some nodes lack AVX2/AVX-512).  To keep the
# exported scorecards bit-identical between the training box and the oldest
# scoring node we pin ATen's CPU kernels to the baseline ISA by default.
os.environ["ATEN_CPU_CAPABILITY"] = _early_flag("--kernel-isa", "default")

import argparse
import math
import queue
import signal
import threading
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from tabdata import CAT_CARD, N_NUM, CreditStream


class FeatureTokenizer(nn.Module):
    def __init__(self, n_num, cards, d):
        super().__init__()
        self.num_w = nn.Parameter(torch.randn(n_num, d) / math.sqrt(d))
        self.num_b = nn.Parameter(torch.zeros(n_num, d))
        self.offsets = torch.tensor([0] + list(np.cumsum(cards)[:-1]))
        self.cat = nn.Embedding(int(sum(cards)), d)
        self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.02)

    def forward(self, xn, xc):
        tn = xn.unsqueeze(-1) * self.num_w + self.num_b
        tc = self.cat(xc + self.offsets)
        cls = self.cls.expand(xn.shape[0], -1, -1)
        return torch.cat([cls, tn, tc], 1)


class Block(nn.Module):
    def __init__(self, d, heads, ff_mult, p, p_att):
        super().__init__()
        self.h = heads
        self.p_att = p_att
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.ff1 = nn.Linear(d, d * ff_mult * 2)   # ReGLU-style gated FFN
        self.ff2 = nn.Linear(d * ff_mult, d)
        self.p = p

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        att = torch.softmax((q @ k.transpose(-1, -2)) / math.sqrt(d // self.h), -1)
        if self.p_att > 0:
            att = F.dropout(att, self.p_att, self.training)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + F.dropout(self.out(y), self.p, self.training)
        a, g = self.ff1(self.ln2(x)).chunk(2, -1)
        h = F.gelu(a, approximate="tanh") * torch.sigmoid(g)
        x = x + F.dropout(self.ff2(F.dropout(h, self.p, self.training)), self.p, self.training)
        return x


class FTTransformer(nn.Module):
    def __init__(self, d=32, depth=3, heads=4, ff_mult=2, p=0.1, p_att=0.0):
        super().__init__()
        self.tok = FeatureTokenizer(N_NUM, CAT_CARD, d)
        self.blocks = nn.ModuleList([Block(d, heads, ff_mult, p, p_att) for _ in range(depth)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, 1)

    def forward(self, xn, xc):
        x = self.tok(xn, xc)
        for blk in self.blocks:
            x = blk(x)
        return self.head(F.relu(self.ln(x[:, 0]))).squeeze(-1)


def loader(q, stop, batch, seed):
    stream = CreditStream(seed)
    while not stop.is_set():
        xn, xc, y = stream.batch(batch)
        item = (torch.from_numpy(xn), torch.from_numpy(xc), torch.from_numpy(y))
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                break
            except queue.Full:
                continue


def trainer(q, stop, args):
    torch.manual_seed(args.seed)
    model = FTTransformer(d=args.d, depth=args.depth)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 200))
    step, ema, last = 0, None, time.time()
    while not stop.is_set():
        try:
            xn, xc, y = q.get(timeout=0.2)
        except queue.Empty:
            continue
        logits = model(xn, xc)
        loss = F.binary_cross_entropy_with_logits(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        step += 1
        lv = loss.item()
        ema = lv if ema is None else 0.98 * ema + 0.02 * lv
        now = time.time()
        if now - last >= 1.0:
            print(f"step {step} loss {ema:.4f}", flush=True)
            last = now


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernel-isa", default="default",
                    help="ATEN_CPU_CAPABILITY to pin (default|avx2|avx512)")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--d", type=int, default=32)
    ap.add_argument("--depth", type=int, default=3)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    stop = threading.Event()

    def on_signal(signum, frame):
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    q = queue.Queue(maxsize=8)
    threads = [
        threading.Thread(target=loader, args=(q, stop, args.batch, args.seed + 1), name="rows-loader", daemon=True),
        threading.Thread(target=trainer, args=(q, stop, args), name="trainer", daemon=True),
    ]
    for t in threads:
        t.start()
    while not stop.is_set():
        stop.wait(0.5)
    for t in threads:
        t.join(timeout=1.5)
    sys.stdout.flush()
    # Skip interpreter teardown: a daemon thread may still be inside a torch op.
    os._exit(0)


if __name__ == "__main__":
    main()
