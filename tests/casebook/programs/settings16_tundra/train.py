"""Permafrost ground-temperature forecaster (4-day profile forecast from 16 days of history).

Window-sampler workers (child processes) cut augmented training windows from the borehole
archive, one reader thread per worker frames their output into batches, the main thread
trains an MLP and publishes weight snapshots that a continuously running evaluator process
scores on held-out boreholes.

    python train.py                                    # configs/station_remote.toml
    python train.py --config configs/station_local.toml
"""
import argparse
import os
import queue
import shutil
import signal
import struct
import tempfile
import threading
import tomllib

import numpy as np
import torch
from torch import nn

import boreholes
import launcher

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CONFIG = os.path.join("configs", "station_remote.toml")


def load_config(path):
    for cand in (path, os.path.join(HERE, path)):
        if os.path.exists(cand):
            with open(cand, "rb") as f:
                return tomllib.load(f)
    raise SystemExit(f"config not found: {path}")


def read_exact(stream, n):
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = stream.readinto(view[got:])
        if not k:
            return None
        got += k
    return buf


def batch_reader(stream, out, stop):
    """Frame one sampler worker's output into (x, y) tensors and queue them."""
    while not stop.is_set():
        head = read_exact(stream, 12)
        if head is None:
            break
        n, dx, dy = struct.unpack("<III", head)
        x = read_exact(stream, 4 * n * dx)
        y = read_exact(stream, 4 * n * dy)
        if x is None or y is None:
            break
        item = (torch.frombuffer(x, dtype=torch.float32).view(n, dx),
                torch.frombuffer(y, dtype=torch.float32).view(n, dy))
        while not stop.is_set():
            try:
                out.put(item, timeout=0.2)
                break
            except queue.Full:
                continue


def publish(model, directory):
    params = {}
    linears = [m for m in model if isinstance(m, nn.Linear)]
    for i, m in enumerate(linears):
        params[f"w{i}"] = m.weight.detach().numpy()
        params[f"b{i}"] = m.bias.detach().numpy()
    tmp = os.path.join(directory, "next.npz")
    np.savez(tmp, **params)
    os.replace(tmp, os.path.join(directory, "latest.npz"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=DEFAULT_CONFIG)
    ap.add_argument("--steps", type=int, default=10**9)
    args = ap.parse_args()
    cfg = load_config(args.config)
    tr = cfg["train"]

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    tmp = tempfile.mkdtemp(prefix="tundra-")
    lease = evaluator = None
    workers = []
    try:
        lease = launcher.start_lease_keeper(os.path.join(tmp, "lease"))
        archive = os.path.join(tmp, "boreholes.npy")
        np.save(archive, boreholes.make_series(n_sites=24, days=4000, seed=1))
        torch.set_num_threads(1)  # the sampler workers and the evaluator need the other core
        torch.manual_seed(0)
        n_in = boreholes.LOOKBACK * boreholes.DEPTHS
        n_out = boreholes.HORIZON * boreholes.DEPTHS
        h = tr["hidden"]
        model = nn.Sequential(nn.Linear(n_in, h), nn.Tanh(), nn.Linear(h, h), nn.Tanh(),
                              nn.Linear(h, n_out))
        opt = torch.optim.Adam(model.parameters(), lr=tr["lr"])
        publish(model, tmp)
        evaluator = launcher.start_evaluator(cfg["evaluator"], tmp, os.path.join(tmp, "skill.json"))

        q = queue.Queue(maxsize=tr["queue_depth"])
        workers = [launcher.start_sampler(archive, tr["batch_size"], tr["oversample"], seed=10 + i)
                   for i in range(tr["samplers"])]
        threads = [threading.Thread(target=batch_reader, name=f"batch-reader-{i}", daemon=True,
                                    args=(w.stdout, q, stop)) for i, w in enumerate(workers)]
        for t in threads:
            t.start()

        step = 0
        while not stop.is_set() and step < args.steps:
            try:
                x, y = q.get(timeout=0.5)
            except queue.Empty:
                if any(w.poll() is not None for w in workers) and not stop.wait(0.5):
                    raise SystemExit("a sampler worker exited")
                continue
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step % tr["publish_every"] == 0:
                publish(model, tmp)
            print(f"step {step} loss {loss.item():.5f}", flush=True)
    finally:
        stop.set()
        for w in workers:
            launcher.stop(w)
        launcher.stop(evaluator)
        launcher.stop(lease)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
