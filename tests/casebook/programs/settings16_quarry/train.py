"""Lithology classifier for drill-core logs.

A parse worker (child process) cuts random windows from LAS-style well logs, summarises
each curve and reports per-window quality-control gauges to the node's statsd agent; a
reader thread frames the worker's output into batches and the main thread trains an MLP.

    python train.py                                   # site profile (configs/site_agent.toml)
    python train.py --config configs/site_loopback.toml
"""
import argparse
import os
import queue
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import tomllib

import numpy as np
import torch
from torch import nn

import drilllog
import qc

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CONFIG = os.path.join("configs", "site_agent.toml")


def load_config(path):
    for cand in (path, os.path.join(HERE, path)):
        if os.path.exists(cand):
            with open(cand, "rb") as f:
                return tomllib.load(f)
    raise SystemExit(f"config not found: {path}")


def start_parser(paths, batch_size, seed, statsd_host, statsd_port):
    """The LAS parse worker: a child process that streams parsed batches on a pipe."""
    env = dict(os.environ, STATSD_HOST=statsd_host, STATSD_PORT=str(statsd_port))
    cmd = [sys.executable, os.path.join(HERE, "drilllog.py"), "--parent", str(os.getpid()),
           "--batch", str(batch_size), "--seed", str(seed), *paths]
    return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, bufsize=0,
                            env=env)


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
    """Read framed batches from the parse worker's pipe and queue them as tensors."""
    while not stop.is_set():
        head = read_exact(stream, 8)
        if head is None:
            break
        n, d = struct.unpack("<II", head)
        feats = read_exact(stream, 4 * n * d)
        labels = read_exact(stream, 8 * n)
        if feats is None or labels is None:
            break
        item = (torch.frombuffer(feats, dtype=torch.float32).view(n, d),
                torch.frombuffer(labels, dtype=torch.int64))
        while not stop.is_set():
            try:
                out.put(item, timeout=0.2)
                break
            except queue.Full:
                continue


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=DEFAULT_CONFIG)
    ap.add_argument("--steps", type=int, default=10**9)
    args = ap.parse_args()
    cfg = load_config(args.config)
    tel, data, tr = cfg["telemetry"], cfg["data"], cfg["train"]

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    tmp = tempfile.mkdtemp(prefix="quarry-")
    parser = None
    try:
        paths = drilllog.write_wells(tmp, data["wells"], data["rows_per_well"], seed=7)
        heartbeat = qc.StatsClient(tel["heartbeat_host"], tel["statsd_port"], prefix="trainer")

        # Feature scaling from one pass over the first well.
        values, lith = drilllog.read_las(paths[0])
        n = len(values) // drilllog.WINDOW
        probe, _ = drilllog.batch_features(
            values[:n * drilllog.WINDOW].reshape(n, drilllog.WINDOW, -1),
            lith[:n * drilllog.WINDOW].reshape(n, drilllog.WINDOW))
        probe = torch.from_numpy(probe)
        mu, sd = probe.mean(0), probe.std(0) + 1e-3

        torch.set_num_threads(1)  # one core for the trainer, the other for the parse worker
        torch.manual_seed(0)
        h = tr["hidden"]
        model = nn.Sequential(nn.Linear(drilllog.N_FEATURES, h), nn.GELU(), nn.Linear(h, h),
                              nn.GELU(), nn.Linear(h, h), nn.GELU(),
                              nn.Linear(h, len(drilllog.LITHOLOGIES)))
        opt = torch.optim.AdamW(model.parameters(), lr=tr["lr"])
        loss_fn = nn.CrossEntropyLoss()

        q = queue.Queue(maxsize=tr["queue_depth"])
        parser = start_parser(paths, tr["batch_size"], 11, tel["statsd_host"], tel["statsd_port"])
        reader = threading.Thread(target=batch_reader, name="batch-reader", daemon=True,
                                  args=(parser.stdout, q, stop))
        reader.start()

        step = 0
        while not stop.is_set() and step < args.steps:
            try:
                x, y = q.get(timeout=0.5)
            except queue.Empty:
                if parser.poll() is not None and not stop.wait(0.5):
                    raise SystemExit("parse worker exited")
                continue
            x = (x - mu) / sd
            loss = loss_fn(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step % 100 == 0:
                heartbeat.gauge("loss", loss.item())
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    finally:
        stop.set()
        if parser is not None and parser.poll() is None:
            parser.terminate()
            parser.wait(timeout=5)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
