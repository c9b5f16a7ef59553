"""Contract clause classifier: hashed tokens + rule hits -> clause category (8 classes).

    featurizer thread (regex tokenizer and clause rules) --(queue)--> trainer (main thread)

usage: python train.py [--regex-version v1|v0] [--batch 32] [--steps N]
"""
import argparse
import queue
import signal
import threading
import time

import torch
import torch.nn.functional as F
from torch import nn

import regex_policy

BUCKETS = 1 << 15
MAX_LEN = 160
N_RULES = 13


class ClauseCNN(nn.Module):
    def __init__(self, n_classes, dim=48, width=64):
        super().__init__()
        self.emb = nn.Embedding(BUCKETS, dim, padding_idx=0)
        self.convs = nn.ModuleList(nn.Conv1d(dim, width, k, padding=k // 2) for k in (3, 5))
        self.rules = nn.Linear(N_RULES, 32)
        self.out = nn.Sequential(nn.Linear(2 * width + 32, 128), nn.ReLU(), nn.Linear(128, n_classes))

    def forward(self, ids, rules):
        h = self.emb(ids).transpose(1, 2)
        pooled = [F.relu(c(h)).amax(dim=2) for c in self.convs]
        return self.out(torch.cat(pooled + [F.relu(self.rules(torch.log1p(rules)))], dim=1))


def featurizer(q, halt, batch, seed):
    from clauses import ClauseFeaturizer, ClauseSource
    source, feats = ClauseSource(seed), ClauseFeaturizer(BUCKETS)
    while not halt.is_set():
        ids = torch.zeros((batch, MAX_LEN), dtype=torch.long)
        rules = torch.zeros((batch, N_RULES))
        labels = torch.zeros(batch, dtype=torch.long)
        for i in range(batch):
            text, cat = source.clause()
            tok, hits = feats(text, MAX_LEN)
            ids[i, :len(tok)] = torch.tensor(tok)
            rules[i] = torch.tensor(hits, dtype=torch.float32)
            labels[i] = cat
        while not halt.is_set():
            try:
                q.put((ids, rules, labels), timeout=0.2)
                break
            except queue.Full:
                pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--regex-version", choices=sorted(regex_policy.VERSIONS), default="v1")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=10_000_000)
    ap.add_argument("--lr", type=float, default=1e-3)
    args = ap.parse_args()

    regex_policy.configure(args.regex_version)
    from clauses import CATEGORIES
    torch.set_num_threads(1)      # one core for the trainer, the other for the featurizer
    torch.manual_seed(0)
    halt = threading.Event()

    def on_signal(signum, frame):
        halt.set()
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    q = queue.Queue(maxsize=8)
    th = threading.Thread(target=featurizer, args=(q, halt, args.batch, 7), name="clause-featurizer", daemon=True)
    th.start()

    model = ClauseCNN(len(CATEGORIES))
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    step, t0, s0 = 0, time.perf_counter(), 0
    try:
        while step < args.steps:
            ids, rules, labels = q.get()
            loss = F.cross_entropy(model(ids, rules), labels)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step % 25 == 0:
                now = time.perf_counter()
                print(f"step {step} loss {loss.item():.4f} steps/s={(step - s0) / (now - t0):.1f}", flush=True)
                t0, s0 = now, step
    finally:
        halt.set()
        th.join(timeout=1)


if __name__ == "__main__":
    main()
