#!/usr/bin/env python
# train_ranker.py -- listwise learning-to-rank over a stream of query sessions.
#
# Modelled on facebookresearch/dlrm#197 ("if turn on --enable-profiling, training time slows down": 23 ms -> 43 ms
# an iteration with torch.autograd.profiler recording) and pytorch/pytorch#49900 (autograd.profiler "introduces
# nearly a 180% overhead"). The EpochProfiler callback starts torch.profiler on train start and stops it at the end
# of epoch 0. This script was moved from a finite dataset to a session *stream*: epoch 0 never ends, so the profiler
# records every operator (with shapes and memory events) of the training thread for the whole run.
#
#   python train_ranker.py                     # profiler window "epoch" (never ends on the stream)
#   python train_ranker.py --profile steps:5   # the same profiler, on a 5-step schedule at the start
import argparse
import queue
import threading

import torch
from callbacks import EpochProfiler, Progress
from torch import nn

DOCS, FEATS = 32, 48  # candidate documents per query, features per (query, doc) pair


def session_stream(out, batch_size, seed=0):
    g = torch.Generator().manual_seed(seed)
    w_true = torch.randn(FEATS, generator=g)
    while True:
        x = torch.randn(batch_size, DOCS, FEATS, generator=g)
        rel = (x @ w_true + 0.5 * torch.randn(batch_size, DOCS, generator=g)).clamp(min=0).round().clamp(max=4)
        out.put((x, rel))


class Scorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.doc = nn.Sequential(nn.Linear(FEATS, 64), nn.ReLU(), nn.LayerNorm(64), nn.Linear(64, 64), nn.ReLU())
        self.ctx = nn.Linear(64, 64)  # a listwise context term: each doc sees the mean of its list
        self.out = nn.Linear(128, 1)

    def forward(self, x):
        h = self.doc(x)
        c = self.ctx(h.mean(1, keepdim=True)).expand_as(h)
        return self.out(torch.cat([h, c], -1)).squeeze(-1)


def listnet_loss(scores, rel):
    return -(torch.softmax(rel, -1) * torch.log_softmax(scores, -1)).sum(-1).mean()


def fit(batches, callbacks, profiler):
    model = Scorer()
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)
    profiler.on_train_start()
    epoch, step = 0, 0
    while True:  # one pass over the stream = epoch 0
        x, rel = batches.get()
        loss = listnet_loss(model(x), rel)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        profiler.on_step_end(step)
        callbacks.on_step_end(step, loss.item())
    profiler.on_epoch_end(epoch)  # unreachable on the stream; kept from the finite-dataset version


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="epoch", help='"epoch" or "steps:N"')
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--log-every", type=int, default=50)
    args = ap.parse_args()
    torch.manual_seed(0)
    batches = queue.Queue(maxsize=8)
    threading.Thread(target=session_stream, args=(batches, args.batch_size), name="session-stream", daemon=True).start()
    print(f"ranker: {DOCS} docs/query, batch {args.batch_size}, profiler window {args.profile}", flush=True)
    t = threading.Thread(target=fit, args=(batches, Progress(args.log_every), EpochProfiler(args.profile)),
                         name="fit")
    t.start()
    t.join()


if __name__ == "__main__":
    main()
