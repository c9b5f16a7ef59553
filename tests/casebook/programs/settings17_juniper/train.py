"""Household load forecaster: the next 4 hours of demand from the last 24 hours of
half-hourly smart-meter readings.

A decoder worker (child process) cuts meter windows out of the utility export and decodes
them, a reader thread frames its output into batches, the main thread trains an MLP.

    python train.py                                    # configs/feeds_host.toml
    python train.py --config configs/feeds_pinned.toml
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
import time
import tomllib

import torch
from torch import nn

import meters

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CONFIG = os.path.join("configs", "feeds_host.toml")


def load_config(path):
    for cand in (path, os.path.join(HERE, path)):
        if os.path.exists(cand):
            with open(cand, "rb") as f:
                return tomllib.load(f)
    raise SystemExit(f"config not found: {path}")


def decoder_env(timezone):
    env = dict(os.environ)
    if timezone == "host":
        env.pop("TZ", None)
    else:
        env["TZ"] = timezone
    return env


def start_decoder(export, slots, feed, batch, timezone):
    return subprocess.Popen(
        [sys.executable, os.path.join(HERE, "meterfeed.py"), "--parent", str(os.getpid()),
         "--export", export, "--slots", str(slots), "--window", str(feed["window"]),
         "--horizon", str(feed["horizon"]), "--batch", str(batch)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=decoder_env(timezone))


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


def site_day(ts):
    """Index of the site's civil day since the start of the export (for the run log)."""
    lt = time.localtime(ts)
    return int((time.mktime((lt.tm_year, lt.tm_mon, lt.tm_mday, 0, 0, 0, 0, 0, -1))
                - time.mktime((2023, 1, 2, 0, 0, 0, 0, 0, -1))) // 86400)


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

    tmp = tempfile.mkdtemp(prefix="juniper-")
    decoder = None
    try:
        export = os.path.join(tmp, "export.csv")
        slots = meters.write_export(export, feed["meters"], feed["days"])
        decoder = start_decoder(export, slots, feed, tr["batch_size"], cfg["site"]["timezone"])
        q = queue.Queue(maxsize=tr["queue_depth"])
        reader = threading.Thread(target=batch_reader, name="batch-reader", daemon=True,
                                  args=(decoder.stdout, q, stop))
        reader.start()

        torch.set_num_threads(1)  # the decoder worker needs the other core
        torch.manual_seed(0)
        n_in, h = feed["window"] + 9, tr["hidden"]
        model = nn.Sequential(nn.Linear(n_in, h), nn.GELU(), nn.Linear(h, h), nn.GELU(),
                              nn.Linear(h, feed["horizon"]))
        opt = torch.optim.AdamW(model.parameters(), lr=tr["lr"])
        step = 0
        while not stop.is_set() and step < args.steps:
            try:
                x, y = q.get(timeout=0.5)
            except queue.Empty:
                if decoder.poll() is not None and not stop.wait(0.5):
                    raise SystemExit("the decoder worker exited")
                continue
            loss = nn.functional.smooth_l1_loss(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step % tr["stamp_every"] == 0:
                print(f"site day {site_day(time.time())}: {step} steps", flush=True)
            print(f"step {step} loss {loss.item():.5f}", flush=True)
    finally:
        stop.set()
        if decoder is not None and decoder.poll() is None:
            decoder.terminate()
            try:
                decoder.wait(timeout=3)
            except subprocess.TimeoutExpired:
                decoder.kill()
                decoder.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
