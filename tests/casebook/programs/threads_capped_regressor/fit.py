"""House-price regression on synthetic tabular features: a loader thread assembles standardised batches into a
bounded queue, the main thread fits a wide MLP on them.

The run's launcher profile pins the math libraries' pools (``--pool-threads``, written into the environment before
torch is imported, as a cluster profile would): 1 (the default here) keeps every matmul on one thread while the
box has more CPUs; 0 leaves the pools at torch's default. The nightly report child is started with its own
single-thread profile either way.

usage: python fit.py [--pool-threads N] [--steps N]
"""
import argparse
import os
import queue
import signal
import subprocess
import sys
import threading
import time


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pool-threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=10_000_000)
    ap.add_argument("--batch", type=int, default=512)
    return ap.parse_args()


ARGS = parse_args()
if ARGS.pool_threads > 0:
    os.environ["OMP_NUM_THREADS"] = str(ARGS.pool_threads)
    os.environ["MKL_NUM_THREADS"] = str(ARGS.pool_threads)
else:
    os.environ["MKL_DYNAMIC"] = "TRUE"  # the profile's harmless line: MKL's own default

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

N_FEATURES = 384
STOP = threading.Event()


def loader(out: "queue.Queue[tuple[torch.Tensor, torch.Tensor]]", batch: int) -> None:
    rng = np.random.default_rng(7)
    w = rng.normal(size=(N_FEATURES,)).astype(np.float32)
    while not STOP.is_set():
        x = rng.normal(size=(batch, N_FEATURES)).astype(np.float32)
        y = np.tanh(x @ w / 20.0)[:, None] + 0.05 * rng.normal(size=(batch, 1)).astype(np.float32)
        item = (torch.from_numpy(x), torch.from_numpy(y.astype(np.float32)))
        while not STOP.is_set():
            try:
                out.put(item, timeout=0.2)
                break
            except queue.Full:
                continue


def report_child() -> None:
    """The nightly report: a one-off child with its own single-thread profile (it only formats a summary)."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    subprocess.run([sys.executable, "-c", "print('[report] ok')"], env=env, check=False)


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: STOP.set())
    model = nn.Sequential(nn.Linear(N_FEATURES, 1536), nn.GELU(), nn.Linear(1536, 1536), nn.GELU(),
                          nn.Linear(1536, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    batches: "queue.Queue[tuple[torch.Tensor, torch.Tensor]]" = queue.Queue(maxsize=4)
    feeder = threading.Thread(target=loader, args=(batches, ARGS.batch), name="tab-loader", daemon=True)
    feeder.start()
    report_child()
    t0, done = time.perf_counter(), 0
    for step in range(1, ARGS.steps + 1):
        if STOP.is_set():
            break
        x, y = batches.get()
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        done = step
        if step % 20 == 0:
            rate = done / (time.perf_counter() - t0)
            # .item() syncs nothing on the CPU; it reads the loss for the log line
            print(f"[fit] step {step} loss {loss.item():.4f} {rate:.1f} steps/s "
                  f"(torch threads {torch.get_num_threads()})", flush=True)
    STOP.set()


if __name__ == "__main__":
    main()
