"""Pollen-count nowcaster for an aerobiology network: predicts the next hour's grass
pollen count at each station from the current weather and counts.

A station-log decoder worker (child process) replays the hourly station logs as CSV
records on a pipe; a reader thread parses the records into batches; the main thread
trains an MLP.

    python train.py                                  # configs/exchange_live.toml
    python train.py --config configs/exchange_bulk.toml
"""
import argparse
import math
import os
import queue
import signal
import subprocess
import sys
import threading
import tomllib

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CONFIG = os.path.join("configs", "exchange_live.toml")


def load_config(path):
    for cand in (path, os.path.join(HERE, path)):
        if os.path.exists(cand):
            with open(cand, "rb") as f:
                return tomllib.load(f)
    raise SystemExit(f"config not found: {path}")


def start_decoder(feed, exchange):
    """The decoder's stdout pipe is opened with the exchange's buffering setting
    (subprocess.Popen bufsize: 0 unbuffered, -1 or N>1 a buffer)."""
    return subprocess.Popen(
        [sys.executable, os.path.join(HERE, "stationlog.py"), "--parent", str(os.getpid()),
         "--stations", str(feed["stations"]), "--hours", str(feed["hours"])],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, bufsize=exchange["pipe_buffer"])


def parse(line, n_stations):
    f = line.split(b",")
    station, hour = int(f[0]), int(f[1])
    vals = [float(v) for v in f[2:10]]
    onehot = [0.0] * n_stations
    onehot[station] = 1.0
    tod = 2 * math.pi * (hour % 24) / 24
    x = [vals[0] / 20, vals[1] / 100, vals[2] / 5, math.log1p(vals[3]), (vals[4] - 1013) / 10,
         math.log1p(vals[5]), math.log1p(vals[6]), math.log1p(vals[7]), math.sin(tod),
         math.cos(tod)] + onehot
    return x, math.log1p(max(float(f[10]), 0.0))


def record_reader(stream, n_stations, batch, out, stop):
    header = stream.readline()
    if not header:
        return
    xs, ys = [], []
    for line in stream:
        if stop.is_set():
            break
        x, y = parse(line, n_stations)
        xs.append(x)
        ys.append(y)
        if len(ys) == batch:
            item = (torch.tensor(xs), torch.tensor(ys).unsqueeze(1))
            xs, ys = [], []
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
    feed, tr = cfg["feed"], cfg["train"]

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    decoder = start_decoder(feed, cfg["exchange"])
    try:
        q = queue.Queue(maxsize=tr["queue_depth"])
        reader = threading.Thread(target=record_reader, name="record-reader", daemon=True,
                                  args=(decoder.stdout, feed["stations"], tr["batch_size"], q,
                                        stop))
        reader.start()

        torch.set_num_threads(1)
        torch.manual_seed(0)
        n_in, h = 10 + feed["stations"], tr["hidden"]
        model = nn.Sequential(nn.Linear(n_in, h), nn.GELU(), nn.Linear(h, h), nn.GELU(),
                              nn.Linear(h, h), nn.GELU(), nn.Linear(h, 1))
        opt = torch.optim.AdamW(model.parameters(), lr=tr["lr"])
        step = 0
        while not stop.is_set() and step < args.steps:
            try:
                x, y = q.get(timeout=0.5)
            except queue.Empty:
                if decoder.poll() is not None and not stop.wait(0.5):
                    raise SystemExit("the station-log decoder exited")
                continue
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            print(f"step {step} loss {loss.item():.5f}", flush=True)
    finally:
        stop.set()
        if decoder.poll() is None:
            decoder.terminate()
            try:
                decoder.wait(timeout=3)
            except subprocess.TimeoutExpired:
                decoder.kill()
                decoder.wait()


if __name__ == "__main__":
    main()
