"""Saffron adulteration classifier on NIR scans streamed by the spectrometer driver.

The scan-reader thread splits the driver's record stream into batches, a console thread
drains the driver's status output, and the main thread trains a small 1-D CNN.

    python train.py                                     # lab bench config (configs/bench_console.toml)
    python train.py --config configs/bench_batch.toml
"""
import argparse
import binascii
import os
import queue
import signal
import threading
import tomllib

import numpy as np
import torch
from torch import nn

import instrument

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CONFIG = os.path.join("configs", "bench_console.toml")
N_CLASSES = 6


def load_config(path):
    for cand in (path, os.path.join(HERE, path)):
        if os.path.exists(cand):
            with open(cand, "rb") as f:
                return tomllib.load(f)
    raise SystemExit(f"config not found: {path}")


def scan_reader(driver, batch_size, channels, out, stop):
    """Cut the record stream at the SCAN headers, decode the scans, queue (x, y) batches."""
    pending = b""
    xs = np.empty((batch_size, channels), dtype=np.float32)
    ys = np.empty(batch_size, dtype=np.int64)
    fill = 0
    while not stop.is_set():
        chunk = driver.read(1 << 16)
        if not chunk:
            break
        records = (pending + chunk).split(b"SCAN ")
        pending = records.pop()
        for rec in records:
            head, sep, body = rec.partition(b"\n")
            if not sep:
                continue
            payload = binascii.a2b_base64(body)  # skips the line breaks (and any CR)
            if len(payload) != 4 * channels:
                continue
            xs[fill] = np.frombuffer(payload, dtype=np.float32)
            ys[fill] = int(head.split()[1])
            fill += 1
            if fill == batch_size:
                batch = (torch.from_numpy(xs.copy()), torch.from_numpy(ys.copy()))
                fill = 0
                while not stop.is_set():
                    try:
                        out.put(batch, timeout=0.2)
                        break
                    except queue.Full:
                        continue


def console(driver, stop, log):
    while not stop.is_set():
        data = driver.read_status()
        if not data:
            break
        log.append(data.decode(errors="replace").strip())
        del log[:-20]


class SpectraNet(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.features = nn.Sequential(
            nn.AvgPool1d(channels // 128), nn.Conv1d(1, 8, 7, padding=3), nn.GELU(),
            nn.AdaptiveAvgPool1d(32))
        self.head = nn.Sequential(nn.Linear(8 * 32, 96), nn.GELU(), nn.Linear(96, N_CLASSES))

    def forward(self, x):
        return self.head(self.features(x.unsqueeze(1)).flatten(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=DEFAULT_CONFIG)
    ap.add_argument("--steps", type=int, default=10**9)
    args = ap.parse_args()
    cfg = load_config(args.config)
    inst, tr = cfg["instrument"], cfg["train"]

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    driver = instrument.Driver(inst)
    try:
        q = queue.Queue(maxsize=tr["queue_depth"])
        status = []
        threads = [
            threading.Thread(target=scan_reader, name="scan-reader", daemon=True,
                             args=(driver, tr["batch_size"], inst["channels"], q, stop)),
            threading.Thread(target=console, name="driver-console", daemon=True,
                             args=(driver, stop, status)),
        ]
        for t in threads:
            t.start()

        torch.set_num_threads(1)  # the other core belongs to the instrument driver
        torch.manual_seed(0)
        model = SpectraNet(inst["channels"])
        opt = torch.optim.Adam(model.parameters(), lr=tr["lr"])
        loss_fn = nn.CrossEntropyLoss()
        step = 0
        while not stop.is_set() and step < args.steps:
            try:
                x, y = q.get(timeout=0.5)
            except queue.Empty:
                if driver.proc.poll() is not None and not stop.wait(0.5):
                    raise SystemExit(f"driver exited: {status[-3:]}")
                continue
            x = (x - x.mean(1, keepdim=True)) / (x.std(1, keepdim=True) + 1e-3)
            loss = loss_fn(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    finally:
        stop.set()
        driver.close()


if __name__ == "__main__":
    main()
