"""Irrigation-demand model for a greenhouse range, trained on the live controller telemetry.

The gateway (gateway.py, child process) streams the climate controllers' uploads; an
ingest thread validates every upload against the shared telemetry schema (schema.py,
pydantic, built with the profile's [schema] settings), turns the readings of each bay into
a feature row and queues the batch; the main thread trains the demand regressor.

    python train.py                               # configs/range_gateway.toml
    python train.py --config configs/range_lab.toml
"""
import argparse
import os
import queue
import signal
import struct
import subprocess
import sys
import threading
import tomllib

import numpy as np
import schema
import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CONFIG = os.path.join("configs", "range_gateway.toml")


def load_config(path):
    for cand in (path, os.path.join(HERE, path)):
        if os.path.exists(cand):
            with open(cand, "rb") as f:
                return tomllib.load(f)
    raise SystemExit(f"config not found: {path}")


def start_gateway(gc):
    return subprocess.Popen(
        [sys.executable, os.path.join(HERE, "gateway.py"), "--bays", str(gc["bays"]),
         "--sensors", str(gc["sensors"]), "--slots", str(gc["slots"])],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)


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


def ingest(stream, adapter, gc, out, stop):
    bays, width = gc["bays"], gc["sensors"] * gc["slots"]
    moist_cols = [s * gc["slots"] + k for s in range(0, gc["sensors"], 8) for k in range(gc["slots"])]
    while not stop.is_set():
        head = read_exact(stream, 4)
        if head is None:
            return
        payload = read_exact(stream, struct.unpack("<I", head)[0])
        if payload is None:
            return
        readings = adapter.validate_json(payload)
        values = np.fromiter((r["value"] for r in readings), np.float32, len(readings)).reshape(bays, width)
        ok = np.fromiter((r["status"] == "OK" for r in readings), np.bool_, len(readings)).reshape(bays, width)
        values = np.where(ok, values, 0.0).astype(np.float32)
        demand = np.maximum(0.0, 30.0 - values[:, moist_cols].mean(1)) / 10.0
        x = torch.from_numpy(np.concatenate([values / 40.0, ok.astype(np.float32)], 1))
        y = torch.from_numpy(demand.astype(np.float32))
        while not stop.is_set():
            try:
                out.put((x, y), timeout=0.2)
                break
            except queue.Full:
                continue


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=DEFAULT_CONFIG)
    ap.add_argument("--steps", type=int, default=10**9)
    args = ap.parse_args()
    cfg = load_config(args.config)
    sc, gc, tr = cfg["schema"], cfg["gateway"], cfg["train"]

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    torch.set_num_threads(1)
    torch.manual_seed(0)

    adapter = schema.upload_adapter(sc)
    gateway = start_gateway(gc)
    q = queue.Queue(maxsize=tr["queue_depth"])
    reader = threading.Thread(target=ingest, name="ingest", daemon=True,
                              args=(gateway.stdout, adapter, gc, q, stop))
    try:
        reader.start()
        n_in, h = 2 * gc["sensors"] * gc["slots"], tr["hidden"]
        model = nn.Sequential(nn.Linear(n_in, h), nn.GELU(), nn.Linear(h, h), nn.GELU(), nn.Linear(h, 1))
        opt = torch.optim.AdamW(model.parameters(), lr=tr["lr"])
        step = 0
        while not stop.is_set() and step < args.steps:
            try:
                x, y = q.get(timeout=0.5)
            except queue.Empty:
                if gateway.poll() is not None and not stop.wait(0.5):
                    raise SystemExit("the gateway exited") from None
                continue
            loss = nn.functional.smooth_l1_loss(model(x).squeeze(1), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            print(f"step {step} loss {loss.item():.5f}", flush=True)
    finally:
        stop.set()
        if gateway.poll() is None:
            gateway.terminate()
            try:
                gateway.wait(timeout=3)
            except subprocess.TimeoutExpired:
                gateway.kill()
                gateway.wait()
        reader.join(timeout=5)


if __name__ == "__main__":
    main()
