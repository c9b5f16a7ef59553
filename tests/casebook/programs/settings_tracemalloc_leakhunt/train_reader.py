"""Extractive QA "answer start" model: a reader thread parses and tokenises JSON records, the training thread fits
a small position-wise span scorer.

Modelled on python/cpython#150494 (tracemalloc "imposes a high cost ... to collect the stacktrace for every
allocation": 3.3x slower on pyperformance, geomean) and flyingcircusio/batou#497 ("enable memory tracking with
tracemalloc in deployment and main modules"; DataDog/dd-trace-py#2136 later removed its tracemalloc-based profiler).
A leak hunt left `memwatch.install("always")` in the training loop: after the warm-up step tracemalloc runs with
25-frame tracebacks for the rest of the run, every Python allocation (the reader's JSON parsing and tokenising, the
trainer's own tensor wrappers) records a traceback, and the reader falls behind the trainer. Nothing of it shows
in a stack: tracemalloc's hooks are C code inside the allocator.

    python train_reader.py                       # memwatch "always" (as committed after the leak hunt)
    python train_reader.py --memwatch startup    # tracemalloc only while the vocabulary is built, then stopped
"""
import argparse
import queue
import threading
import time

import torch
from qa import data, memwatch
from torch import nn


class SpanScorer(nn.Module):
    """Token embeddings, a question summary mixed into every position, two position-wise layers, a start logit."""

    def __init__(self, vocab_size, dim=96):
        super().__init__()
        self.emb = nn.Embedding(vocab_size, dim, padding_idx=0)
        self.q_summary = nn.EmbeddingBag(vocab_size, dim, mode="mean", padding_idx=0)
        self.mix = nn.Sequential(nn.Linear(2 * dim, dim), nn.GELU(), nn.Linear(dim, dim), nn.GELU())
        self.out = nn.Linear(dim, 1)

    def forward(self, ids, q_ids):
        h = self.emb(ids)
        q = self.q_summary(q_ids)[:, None, :].expand_as(h)
        return self.out(self.mix(torch.cat([h, q], -1))).squeeze(-1)  # a start logit per position


def train(batches, vocab_size, log_every, memwatch_mode):
    model = SpanScorer(vocab_size)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    step, t0 = 0, time.time()
    while True:
        rows, questions, starts = batches.get()
        ids, q_ids, target = torch.tensor(rows), torch.tensor(questions), torch.tensor(starts)
        loss = nn.functional.cross_entropy(model(ids, q_ids), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if step == 1 and memwatch_mode == "always":
            memwatch.install("always")  # after the warm-up step: later snapshots then show steady-state growth
        if step % log_every == 0:
            now = time.time()
            print(f"step {step} loss {loss.item():.3f} ({log_every / (now - t0):.2f} steps/s)", flush=True)
            t0 = now


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memwatch", choices=("always", "startup", "off"), default="always")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--max-len", type=int, default=64)
    ap.add_argument("--log-every", type=int, default=5)
    args = ap.parse_args()
    if args.memwatch == "startup":
        memwatch.install("startup")
    lines = data.fake_shard(2000)
    vocab = data.build_vocab(lines)
    if args.memwatch == "startup":
        memwatch.report(stop=True)  # where the start-up's memory went; tracing ends here
    print(f"shard: {len(lines)} records, vocab {len(vocab) + 2}, memwatch={args.memwatch}", flush=True)
    batches = queue.Queue(maxsize=8)
    data.BatchReader(lines, vocab, args.batch_size, args.max_len, batches).start()
    trainer = threading.Thread(target=train, args=(batches, len(vocab) + 2, args.log_every, args.memwatch), name="trainer")
    trainer.start()
    trainer.join()


if __name__ == "__main__":
    main()
