#!/usr/bin/env python
# Reproduces the mechanism of open-mmlab/mmpretrain#196 ("data loading in each epoch starting is slow") and
# pytorch/pytorch#15849 (DataLoader re-creates its worker processes every epoch unless persistent_workers=True):
# short epochs, and every epoch pays for new workers that rebuild their state in worker_init_fn.
"""Keyword spotting on short clips: a 1-D conv net, many short epochs (one per validation cycle)."""
import argparse
import time

import torch
import torch.nn as nn
from torch.utils.data import DataLoader

from speechdata.dataset import KeywordClips, worker_init


def build_loader(args):
    return DataLoader(KeywordClips(args.batch * args.batches_per_epoch), batch_size=args.batch, shuffle=True,
                      num_workers=args.workers, worker_init_fn=worker_init,
                      multiprocessing_context="fork")


def build_model():
    return nn.Sequential(nn.Conv1d(1, 16, 9, stride=4), nn.ReLU(), nn.Conv1d(16, 32, 9, stride=4), nn.ReLU(),
                         nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(32, 12))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--batches-per-epoch", type=int, default=6)
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(1)
    loader = build_loader(args)
    model = build_model()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    epoch = 0
    while True:
        t0 = time.perf_counter()
        for clips, labels in loader:
            loss = nn.functional.cross_entropy(model(clips[:, None, :]), labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
        epoch += 1
        print(f"epoch {epoch:3d} done in {time.perf_counter() - t0:.2f}s loss {loss.item():.3f}", flush=True)


if __name__ == "__main__":
    main()
