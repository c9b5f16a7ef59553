"""Chick-provisioning model for a puffin colony, trained on the burrow-camera stream.

The camera replay (cameras.py, child process) streams burrow visits as JSON lines; the
ingest thread validates each line into a Visit (schema.py, pydantic, built with the
profile's [schema] settings) and keeps the recent visits of every burrow. The history
builder thread draws burrows, wraps each one's last visits in a BurrowHistory (the unit
the annotation tool and the exporter share), turns the histories into feature tensors
and queues the batches; the main thread trains the provisioning-rate model.

    python train.py                                  # configs/colony_annotate.toml
    python train.py --config configs/colony_stream.toml
"""
import argparse
import collections
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import tomllib

import numpy as np
import schema
import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CONFIG = os.path.join("configs", "colony_annotate.toml")
BEHAVIOURS = ("provisioning", "arrival", "departure", "maintenance", "loafing")


def load_config(path):
    for cand in (path, os.path.join(HERE, path)):
        if os.path.exists(cand):
            with open(cand, "rb") as f:
                return tomllib.load(f)
    raise SystemExit(f"config not found: {path}")


def start_cameras(cc):
    return subprocess.Popen(
        [sys.executable, os.path.join(HERE, "cameras.py"), "--burrows", str(cc["burrows"]),
         "--frames", str(cc["frames"]), "--rate", str(cc["rate"])], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)


def ingest(stream, Visit, recent, lock, hc, stop, ready):
    while not stop.is_set():
        line = stream.readline()
        if not line:
            return
        v = Visit.model_validate_json(line)
        with lock:
            dq = recent.get(v.burrow)
            if dq is None:
                dq = recent[v.burrow] = collections.deque(maxlen=hc["visits"])
            dq.append(v)
            if not ready.is_set() and len(recent) >= hc["burrows_ready"]:
                ready.set()


def features(history, frames):
    vs = history.visits
    x = np.zeros((len(vs), frames + 11), np.float32)
    for i, v in enumerate(vs):
        x[i, :frames] = v.frame_scores
        x[i, frames] = v.duration_s / 180.0
        x[i, frames + 1] = v.weather.wind_ms / 20.0
        x[i, frames + 2] = float(v.weather.rain)
        x[i, frames + 3] = v.weather.visibility_km / 20.0
        x[i, frames + 4 + BEHAVIOURS.index(v.behaviour)] = 1.0
        x[i, frames + 9] = (v.start.hour + v.start.minute / 60.0) / 24.0
        x[i, frames + 10] = len(v.boxes) / 12.0
    return x


def history_builder(BurrowHistory, recent, lock, hc, frames, out, stop, ready):
    rng = random.Random(3)
    ready.wait()
    n = hc["visits"]
    while not stop.is_set():
        with lock:
            keys = [k for k, dq in recent.items() if len(dq) == n]
            picks = [list(recent[k]) for k in rng.sample(keys, min(hc["batch"], len(keys)))]
        if len(picks) < hc["batch"]:
            stop.wait(0.05)
            continue
        xs, ys = [], []
        for visits in picks:
            h = BurrowHistory(burrow=visits[-1].burrow, visits=visits)
            xs.append(features(h, frames))
            ys.append(sum(v.fish for v in h.visits[-4:]) / 4.0)
        batch = (torch.from_numpy(np.stack(xs)), torch.tensor(ys, dtype=torch.float32))
        while not stop.is_set():
            try:
                out.put(batch, timeout=0.2)
                break
            except queue.Full:
                continue


class Provisioning(nn.Module):
    def __init__(self, n_in, h):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(n_in, h), nn.GELU(), nn.Linear(h, h), nn.GELU())
        self.rnn = nn.GRU(h, h, batch_first=True)
        self.head = nn.Linear(h, 1)

    def forward(self, x):
        out, _ = self.rnn(self.enc(x))
        return self.head(out[:, -1]).squeeze(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=DEFAULT_CONFIG)
    ap.add_argument("--steps", type=int, default=10**9)
    args = ap.parse_args()
    cfg = load_config(args.config)
    sc, cc, hc, tr = cfg["schema"], cfg["cameras"], cfg["history"], cfg["train"]

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    torch.set_num_threads(1)
    torch.manual_seed(0)

    Visit, BurrowHistory = schema.build(sc)
    cams = start_cameras(cc)
    recent, lock, ready = {}, threading.Lock(), threading.Event()
    q = queue.Queue(maxsize=tr["queue_depth"])
    reader = threading.Thread(target=ingest, name="ingest", daemon=True,
                              args=(cams.stdout, Visit, recent, lock, hc, stop, ready))
    builder = threading.Thread(target=history_builder, name="history-builder", daemon=True,
                               args=(BurrowHistory, recent, lock, hc, cc["frames"], q, stop, ready))
    try:
        reader.start()
        builder.start()
        model = Provisioning(cc["frames"] + 11, tr["hidden"])
        opt = torch.optim.AdamW(model.parameters(), lr=tr["lr"])
        step = 0
        while not stop.is_set() and step < args.steps:
            try:
                x, y = q.get(timeout=0.5)
            except queue.Empty:
                if cams.poll() is not None and not stop.wait(0.5):
                    raise SystemExit("the camera replay exited") from None
                continue
            loss = nn.functional.smooth_l1_loss(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            print(f"step {step} loss {loss.item():.5f}", flush=True)
    finally:
        stop.set()
        if cams.poll() is None:
            cams.terminate()
            try:
                cams.wait(timeout=3)
            except subprocess.TimeoutExpired:
                cams.kill()
                cams.wait()
        reader.join(timeout=5)
        builder.join(timeout=5)


if __name__ == "__main__":
    main()
