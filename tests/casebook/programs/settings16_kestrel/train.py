"""Bird-call species classifier fed from the lab's feature service.

A fetcher thread pulls log-mel patches and labels for each batch over HTTP (requests,
one keep-alive session), the main thread trains a small CNN on them.

    python train.py                                        # configs/fetch_lab.toml
    python train.py --config configs/fetch_pinned.toml
"""
import argparse
import os
import queue
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import tomllib

import numpy as np
import requests
import torch
from torch import nn

import credentials

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CONFIG = os.path.join("configs", "fetch_lab.toml")
STORE_HOST, STORE_USER = "127.0.0.1", "kestrel-trainer"
MELS, FRAMES, SPECIES = 32, 12, 10


def load_config(path):
    for cand in (path, os.path.join(HERE, path)):
        if os.path.exists(cand):
            with open(cand, "rb") as f:
                return tomllib.load(f)
    raise SystemExit(f"config not found: {path}")


def start_store(password):
    proc = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "featurestore.py"), "--parent", str(os.getpid()),
         "--user", STORE_USER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    proc.stdin.write(password + "\n")
    proc.stdin.flush()
    port = int(proc.stdout.readline())
    return proc, f"http://{STORE_HOST}:{port}"


def fetch(session, base, batch, batch_size):
    params = {"batch": batch, "size": batch_size}
    r = session.get(f"{base}/clips", params=params, timeout=10)
    r.raise_for_status()
    clips = np.frombuffer(r.content, dtype=np.float32).reshape(batch_size, MELS, FRAMES)
    r = session.get(f"{base}/labels", params=params, timeout=10)
    r.raise_for_status()
    return clips, np.frombuffer(r.content, dtype=np.int64)


def fetcher(session, base, batch_size, out, stop, errors):
    batch = 0
    while not stop.is_set():
        try:
            clips, labels = fetch(session, base, batch, batch_size)
        except requests.RequestException as exc:
            errors.append(repr(exc))
            return
        item = (torch.from_numpy(clips.copy()), torch.from_numpy(labels.copy()))
        batch += 1
        while not stop.is_set():
            try:
                out.put(item, timeout=0.2)
                break
            except queue.Full:
                continue


class CallNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d((4, 3)))
        self.head = nn.Linear(32 * 12, SPECIES)

    def forward(self, x):
        return self.head(self.body(x.unsqueeze(1)).flatten(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=DEFAULT_CONFIG)
    ap.add_argument("--steps", type=int, default=10**9)
    args = ap.parse_args()
    cfg = load_config(args.config)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    tmp = tempfile.mkdtemp(prefix="kestrel-")
    store = None
    try:
        password = secrets.token_hex(16)
        credentials.write_site_netrc(tmp, cfg["credentials"]["site_hosts"], STORE_HOST,
                                     STORE_USER, password)
        store, base = start_store(password)

        # Readiness probe with a throwaway client: credentials come from $NETRC.
        assert requests.get(f"{base}/health", timeout=10).ok

        session = credentials.configure_session(requests.Session(), cfg["credentials"]["source"],
                                                STORE_HOST)
        q = queue.Queue(maxsize=cfg["train"]["queue_depth"])
        errors = []
        t = threading.Thread(target=fetcher, name="clip-fetcher", daemon=True,
                             args=(session, base, cfg["train"]["batch_size"], q, stop, errors))
        t.start()

        torch.set_num_threads(1)  # the feature service and the fetcher use the other core
        torch.manual_seed(0)
        model = CallNet()
        opt = torch.optim.Adam(model.parameters(), lr=cfg["train"]["lr"])
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
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    finally:
        stop.set()
        if store is not None:
            store.terminate()
            store.wait(timeout=5)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
