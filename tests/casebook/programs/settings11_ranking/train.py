"""Listwise learning-to-rank (ListNet-style softmax cross-entropy over 16 candidates per query).

    trainer (main thread) --(per-example losses, bounded queue)--> ledger writer thread -> SQLite file

usage: python train.py [--ledger-commit autocommit|deferred] [--queries 32] [--steps N]
"""
import argparse
import os
import queue
import shutil
import signal
import tempfile
import threading
import time

import ledger
import torch
from queries import DOCS_PER_QUERY, N_INPUT, QuerySampler
from torch import nn


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ledger-commit", choices=tuple(ledger.MODES), default="autocommit")
    ap.add_argument("--queries", type=int, default=32)
    ap.add_argument("--steps", type=int, default=10_000_000)
    ap.add_argument("--lr", type=float, default=1e-3)
    return ap.parse_args()


class Ranker(nn.Module):
    def __init__(self, hidden=128):
        super().__init__()
        self.doc = nn.Sequential(nn.Linear(N_INPUT, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU())
        self.ctx = nn.MultiheadAttention(hidden, 4, batch_first=True)
        self.out = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.GELU(), nn.Linear(hidden, 1))

    def forward(self, x):
        h = self.doc(x)
        c, _ = self.ctx(h, h, h, need_weights=False)
        return self.out(torch.cat([h, c], -1)).squeeze(-1)


def writer(conn, q, halt):
    while True:
        try:
            item = q.get(timeout=0.2)
        except queue.Empty:
            if halt.is_set():
                return
            continue
        if item is None:
            return
        step, rows = item
        ledger.append(conn, rows)
        if step % 500 == 0:
            ledger.prune(conn, step)
        conn.commit()


def main():
    args = parse_args()
    torch.set_num_threads(1)      # one core for the trainer, the other for the ledger writer
    torch.manual_seed(0)
    workdir = tempfile.mkdtemp(prefix="ltr-run-")
    halt = threading.Event()

    def on_signal(signum, frame):
        halt.set()
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    conn = ledger.open_ledger(os.path.join(workdir, "ledger.sqlite"), args.ledger_commit)
    q = queue.Queue(maxsize=2)
    th = threading.Thread(target=writer, args=(conn, q, halt), name="ledger-writer", daemon=True)
    th.start()

    sampler = QuerySampler()
    model = Ranker()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01, foreach=True)
    docs = torch.arange(DOCS_PER_QUERY)
    step, t0, s0 = 0, time.perf_counter(), 0
    try:
        while step < args.steps:
            qids, x, labels = sampler.batch(args.queries)
            scores = model(x)
            target = torch.softmax(labels.float(), 1)
            per_doc = -target * torch.log_softmax(scores, 1)
            loss = per_doc.sum(1).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            rows = list(zip([step] * qids.numel() * DOCS_PER_QUERY,
                            qids.repeat_interleave(DOCS_PER_QUERY).tolist(),
                            docs.repeat(qids.numel()).tolist(),
                            labels.flatten().tolist(),
                            scores.detach().flatten().tolist(),
                            per_doc.detach().flatten().tolist(), strict=True))
            while not halt.is_set():
                try:
                    q.put((step, rows), timeout=0.2)
                    break
                except queue.Full:
                    pass
            if step % 10 == 0:
                now = time.perf_counter()
                print(f"step {step} loss {loss.item():.4f} steps/s={(step - s0) / (now - t0):.1f}", flush=True)
                t0, s0 = now, step
    finally:
        halt.set()
        th.join(timeout=2)
        conn.close()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
