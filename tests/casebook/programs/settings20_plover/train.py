"""Bat-call classifier for an acoustic monitoring station.

The window store (a child HTTP service) serves ultrasonic windows; a fetcher thread GETs
each window of a batch with urllib and queues the batch; the main thread trains an MLP
on log-spectra. The station's egress agent (a forward proxy child) is started for the
profile's HTTP environment (netenv.apply).

    python train.py                                   # configs/site_egress.toml
    python train.py --config configs/site_direct.toml
"""
import argparse
import http.client
import os
import queue
import signal
import subprocess
import sys
import threading
import tomllib
import urllib.request

import numpy as np
import torch
from torch import nn

import netenv

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CONFIG = os.path.join("configs", "site_egress.toml")


def load_config(path):
    for cand in (path, os.path.join(HERE, path)):
        if os.path.exists(cand):
            with open(cand, "rb") as f:
                return tomllib.load(f)
    raise SystemExit(f"config not found: {path}")


def start_service(kind):
    p = subprocess.Popen([sys.executable, os.path.join(HERE, "services.py"), kind,
                          "--parent", str(os.getpid())],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
    port = int(p.stdout.readline())
    return p, port


def fetcher(store_port, st, out, stop):
    n, wid = st["windows_per_batch"], 0
    while not stop.is_set():
        xs, ys = [], []
        for _ in range(n):
            wid += 1
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{store_port}/window/{wid}", timeout=10) as r:
                    raw = r.read()
            except (OSError, http.client.HTTPException):
                if stop.is_set():
                    return
                raise
            x = np.frombuffer(raw[:-1], dtype=np.float32)
            spec = np.log1p(np.abs(np.fft.rfft(x * np.hanning(x.size)))[:256])
            xs.append(spec.astype(np.float32))
            ys.append(raw[-1])
        item = (torch.from_numpy(np.stack(xs)), torch.tensor(ys, dtype=torch.long))
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
    st, tr = cfg["station"], cfg["train"]

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    children = []
    try:
        store, store_port = start_service("store")
        children.append(store)
        agent, agent_port = start_service("agent")
        children.append(agent)
        netenv.apply(cfg["network"], agent_port)

        q = queue.Queue(maxsize=tr["queue_depth"])
        th = threading.Thread(target=fetcher, name="window-fetcher", daemon=True,
                              args=(store_port, st, q, stop))
        th.start()
        torch.set_num_threads(1)
        torch.manual_seed(0)
        h = tr["hidden"]
        model = nn.Sequential(nn.LayerNorm(256), nn.Linear(256, h), nn.GELU(), nn.Linear(h, h),
                              nn.GELU(), nn.Linear(h, 4))
        opt = torch.optim.AdamW(model.parameters(), lr=tr["lr"])
        step = 0
        while not stop.is_set() and step < args.steps:
            try:
                x, y = q.get(timeout=0.5)
            except queue.Empty:
                if not th.is_alive() and not stop.is_set():
                    raise SystemExit("the window fetcher died")
                continue
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            print(f"step {step} loss {loss.item():.5f}", flush=True)
    finally:
        stop.set()
        for p in children:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=3)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


if __name__ == "__main__":
    main()
