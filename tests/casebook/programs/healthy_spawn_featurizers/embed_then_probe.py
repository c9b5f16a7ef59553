#!/usr/bin/env python
# Embed-then-probe with a process pool. Workers are single-threaded (one process per core is the parallelism);
# the main process keeps its own OpenMP pool for the probe.
import collections
import itertools
import os
import time
from concurrent.futures import ProcessPoolExecutor
import multiprocessing

import torch

N_PROC = 2


def _init_worker():
    torch.set_num_threads(1)
    global NET
    torch.manual_seed(0)
    NET = torch.nn.Sequential(
        torch.nn.Conv2d(3, 24, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(24, 48, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(), torch.nn.Linear(48, 64)).eval()


def embed(seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(16, 3, 32, 32, generator=g)
    with torch.no_grad():
        return NET(x), torch.randint(0, 10, (16,), generator=g)


if __name__ == "__main__":
    os.environ["OMP_NUM_THREADS"] = "1"  # for the workers: one thread each
    head = torch.nn.Linear(64, 10)
    sgd = torch.optim.SGD(head.parameters(), lr=0.05)
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(N_PROC, mp_context=ctx, initializer=_init_worker) as ex:
        t0, n = time.time(), 0
        pending = collections.deque(ex.submit(embed, s) for s in range(8))
        for step in itertools.count(1):
            z, y = pending.popleft().result()
            pending.append(ex.submit(embed, step + 8))
            loss = torch.nn.functional.cross_entropy(head(z), y)
            sgd.zero_grad()
            loss.backward()
            sgd.step()
            n += len(y)
            if step % 20 == 0:
                print(f"[probe] step {step} {n / (time.time() - t0):.0f} img/s", flush=True)
