"""Dissolved-oxygen nowcaster for a coastal lagoon, trained on the buoys' sensor windows.

The feature service (featureserver.py, child process) serves each station's resampled
sensor window over HTTP; the window-fetcher thread requests the windows of a round of
stations in parallel (a thread pool, one urllib request each), cuts training examples
out of them (a 2-hour context of the six sensors -> the oxygen one hour later) and queues
the batches; the main thread trains the convolutional nowcaster.

    python train.py                               # configs/buoy_gateway.toml
    python train.py --config configs/lagoon_lab.toml
"""
import argparse
import concurrent.futures
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import tomllib
import urllib.request

import numpy as np
import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CONFIG = os.path.join("configs", "buoy_gateway.toml")
N_SENSORS = 6


def load_config(path):
    for cand in (path, os.path.join(HERE, path)):
        if os.path.exists(cand):
            with open(cand, "rb") as f:
                return tomllib.load(f)
    raise SystemExit(f"config not found: {path}")


def start_featureserver(fc):
    proc = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "featureserver.py"), "--backlog", str(fc["listen_backlog"]),
         "--stations", str(fc["stations"]), "--samples", str(fc["samples"])],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    port = int(proc.stdout.readline())
    return proc, port


def fetch_window(port, station, hour, samples, timeout):
    url = f"http://127.0.0.1:{port}/window/{station}/{hour}"
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        data = resp.read()
    return np.frombuffer(data, np.float32).reshape(N_SENSORS, samples)


def window_fetcher(port, fc, wc, out, stop):
    rng = random.Random(5)
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=wc["parallel"], thread_name_prefix="fetch")
    ctx, lead, bs = wc["context"], wc["lead"], wc["batch"]
    mean = np.array([1.5, 18.0, 28.0, 6.0, 2.0, 6.5], np.float32)[:, None]
    scale = np.array([1.0, 3.0, 3.0, 3.0, 1.5, 1.5], np.float32)[:, None]
    try:
        while not stop.is_set():
            stations = rng.sample(range(fc["stations"]), wc["parallel"])
            hour = rng.randrange(24 * 365)
            windows = list(pool.map(lambda s: fetch_window(port, s, hour, fc["samples"], wc["timeout_s"]),
                                    stations))
            windows = [(w - mean) / scale for w in windows]
            for _ in range(wc["batches_per_round"]):
                xs, ys = [], []
                for _ in range(bs):
                    w = windows[rng.randrange(len(windows))]
                    t0 = rng.randrange(fc["samples"] - ctx - lead)
                    xs.append(w[:, t0:t0 + ctx])
                    ys.append(w[5, t0 + ctx + lead - 1])
                batch = (torch.from_numpy(np.stack(xs)), torch.tensor(ys, dtype=torch.float32))
                while not stop.is_set():
                    try:
                        out.put(batch, timeout=0.2)
                        break
                    except queue.Full:
                        continue
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=DEFAULT_CONFIG)
    ap.add_argument("--steps", type=int, default=10**9)
    args = ap.parse_args()
    cfg = load_config(args.config)
    fc, wc, tr = cfg["featureserver"], cfg["fetch"], cfg["train"]

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    torch.set_num_threads(1)
    torch.manual_seed(0)

    server, port = start_featureserver(fc)
    q = queue.Queue(maxsize=tr["queue_depth"])
    fetcher = threading.Thread(target=window_fetcher, name="window-fetcher", daemon=True,
                               args=(port, fc, wc, q, stop))
    try:
        fetcher.start()
        c = tr["channels"]
        model = nn.Sequential(
            nn.Conv1d(N_SENSORS, c, 7, stride=2, padding=3), nn.GELU(),
            nn.Conv1d(c, c, 5, stride=2, padding=2), nn.GELU(),
            nn.Conv1d(c, c, 5, stride=2, padding=2), nn.GELU(),
            nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(c, c), nn.GELU(), nn.Linear(c, 1))
        opt = torch.optim.AdamW(model.parameters(), lr=tr["lr"])
        step = 0
        while not stop.is_set() and step < args.steps:
            try:
                x, y = q.get(timeout=0.5)
            except queue.Empty:
                if server.poll() is not None and not stop.wait(0.5):
                    raise SystemExit("the feature server exited") from None
                if not fetcher.is_alive() and not stop.is_set():
                    raise SystemExit("the window fetcher stopped") from None
                continue
            loss = nn.functional.mse_loss(model(x).squeeze(1), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            print(f"step {step} loss {loss.item():.5f}", flush=True)
    finally:
        stop.set()
        if server.poll() is None:
            server.terminate()
            try:
                server.wait(timeout=3)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        fetcher.join(timeout=5)


if __name__ == "__main__":
    main()
