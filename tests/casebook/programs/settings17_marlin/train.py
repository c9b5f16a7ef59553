"""Gearbox fault classifier for wind turbines, fed from the farm's vibration historian.

A fetcher thread pulls accelerometer snippets from the historian service (a child process
here, HTTP over one keep-alive connection), the main thread trains a 1-D CNN on them.

    python train.py                                    # configs/commissioning.toml
    python train.py --config configs/production.toml
"""
import argparse
import logging
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import tomllib

import httpx
import numpy as np
import torch
from torch import nn

import runlog

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CONFIG = os.path.join("configs", "commissioning.toml")
log = logging.getLogger("gearbox.train")
fetch_log = logging.getLogger("gearbox.fetch")


def load_config(path):
    for cand in (path, os.path.join(HERE, path)):
        if os.path.exists(cand):
            with open(cand, "rb") as f:
                return tomllib.load(f)
    raise SystemExit(f"config not found: {path}")


def start_historian(hc):
    proc = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "historian.py"), "--parent", str(os.getpid()),
         "--turbines", str(hc["turbines"]), "--per-turbine", str(hc["snippets_per_turbine"]),
         "--samples", str(hc["samples"])], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    port = int(proc.stdout.readline())
    return proc, f"http://127.0.0.1:{port}"


def fetcher(client, hc, batch_size, out, stop, errors):
    rng = np.random.default_rng(0)
    n = 0
    while not stop.is_set():
        xs = np.empty((batch_size, hc["samples"]), dtype=np.float32)
        ys = np.empty(batch_size, dtype=np.int64)
        try:
            for j in range(batch_size):
                k = int(rng.integers(0, hc["turbines"]))
                i = int(rng.integers(0, hc["snippets_per_turbine"]))
                r = client.get(f"/snippet/{k}/{i}")
                r.raise_for_status()
                xs[j] = np.frombuffer(r.content, dtype=np.float32)
                ys[j] = int(r.headers["X-Label"])
        except httpx.HTTPError as exc:
            errors.append(repr(exc))
            return
        n += 1
        fetch_log.debug("batch %d fetched (%d snippets)", n, batch_size)
        item = (torch.from_numpy(xs), torch.from_numpy(ys))
        while not stop.is_set():
            try:
                out.put(item, timeout=0.2)
                break
            except queue.Full:
                continue


class GearboxNet(nn.Module):
    def __init__(self, classes=4):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv1d(1, 16, 9, stride=2, padding=4), nn.ReLU(),
            nn.Conv1d(16, 32, 9, stride=2, padding=4), nn.ReLU(),
            nn.Conv1d(32, 32, 9, stride=2, padding=4), nn.ReLU(), nn.AdaptiveAvgPool1d(8))
        self.head = nn.Linear(32 * 8, classes)

    def forward(self, x):
        return self.head(self.body(x.unsqueeze(1)).flatten(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=DEFAULT_CONFIG)
    ap.add_argument("--steps", type=int, default=10**9)
    args = ap.parse_args()
    cfg = load_config(args.config)
    hc, tr = cfg["historian"], cfg["train"]

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    tmp = tempfile.mkdtemp(prefix="marlin-")
    historian = client = None
    try:
        logfile = runlog.setup(cfg["logging"], tmp)
        historian, base = start_historian(hc)
        client = httpx.Client(base_url=base, timeout=10.0)
        client.get("/health").raise_for_status()
        log.info("historian at %s, logging to %s", base, logfile)

        q = queue.Queue(maxsize=tr["queue_depth"])
        errors = []
        t = threading.Thread(target=fetcher, name="snippet-fetcher", daemon=True,
                             args=(client, hc, tr["batch_size"], q, stop, errors))
        t.start()

        torch.set_num_threads(1)  # the historian service needs the other core
        torch.manual_seed(0)
        model = GearboxNet()
        opt = torch.optim.Adam(model.parameters(), lr=tr["lr"])
        loss_fn = nn.CrossEntropyLoss()
        step = 0
        while not stop.is_set() and step < args.steps:
            try:
                x, y = q.get(timeout=0.5)
            except queue.Empty:
                if not t.is_alive() and not stop.wait(0.5):
                    raise SystemExit(f"fetcher stopped: {errors[-1:]}")
                continue
            loss = loss_fn(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step % tr["report_every"] == 0:
                log.info("step %d loss %.4f", step, loss.item())
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    finally:
        stop.set()
        if client is not None:
            client.close()
        if historian is not None and historian.poll() is None:
            historian.terminate()
            try:
                historian.wait(timeout=3)
            except subprocess.TimeoutExpired:
                historian.kill()
                historian.wait()
        logging.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
