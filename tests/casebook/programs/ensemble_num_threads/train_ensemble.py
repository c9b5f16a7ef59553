"""Bagged ensemble of small MLP regressors: one member per bootstrap resample, trained side by side.

Every member trains in its own worker of a ThreadPoolExecutor. The member function was lifted from the
single-model script, which sets torch's thread count for the workstation it was tuned on.

    python train_ensemble.py [--members 4] [--log-every 2.0]
"""
import argparse
import concurrent.futures
import threading
import time

import torch
from torch import nn

INTRA_OP_THREADS = 8  # what the single-model script used on the 8-core workstation


class Throughput:
    """Samples trained by all members, for the progress line."""

    def __init__(self):
        self._lock = threading.Lock()
        self.samples = 0

    def add(self, n):
        with self._lock:
            self.samples += n


def make_member(seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(96, 192), nn.GELU(), nn.Linear(192, 192), nn.GELU(), nn.Linear(192, 96))


def fit_member(seed, tally, stop):
    torch.set_num_threads(INTRA_OP_THREADS)
    model = make_member(seed)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    gen = torch.Generator().manual_seed(1000 + seed)
    features = torch.randn(2048, 96, generator=gen)
    targets = torch.tanh(features @ torch.randn(96, 96, generator=gen))
    while not stop.is_set():
        idx = torch.randint(0, features.shape[0], (48,), generator=gen)
        loss = nn.functional.mse_loss(model(features[idx]), targets[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        tally.add(idx.numel())
    return seed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--members", type=int, default=4)
    parser.add_argument("--log-every", type=float, default=2.0)
    args = parser.parse_args()
    tally, stop = Throughput(), threading.Event()
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.members, thread_name_prefix="member") as pool:
        futures = [pool.submit(fit_member, seed, tally, stop) for seed in range(args.members)]
        try:
            while tally.samples < 48 * 20 * args.members:  # the members' first steps (imports, warm-up) first
                time.sleep(0.2)
            last_t, last_n, report = time.time(), tally.samples, 0
            while True:
                time.sleep(args.log_every)
                now, n = time.time(), tally.samples
                report += 1
                print(f"[ensemble] report {report} samples/s={(n - last_n) / (now - last_t):.0f}", flush=True)
                last_t, last_n = now, n
        finally:
            stop.set()
            concurrent.futures.wait(futures)


if __name__ == "__main__":
    main()
