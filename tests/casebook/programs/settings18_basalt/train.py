"""Drill-core mineral mapper: classifies SWIR reflectance spectra from a core-tray
line scanner into six alteration minerals.

A decoder worker (child process) calibrates and continuum-normalises the scan archive,
a reader thread frames its output into batches, the main thread trains a 1-D CNN.

    python train.py                                     # configs/site_image.toml
    python train.py --config configs/site_eager.toml
"""
import argparse
import os
import queue
import shutil
import signal
import struct
import subprocess
import tempfile
import threading
import tomllib

import torch
from torch import nn

import corescan
import launcher

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CONFIG = os.path.join("configs", "site_image.toml")


def load_config(path):
    for cand in (path, os.path.join(HERE, path)):
        if os.path.exists(cand):
            with open(cand, "rb") as f:
                return tomllib.load(f)
    raise SystemExit(f"config not found: {path}")


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
        n, bands, _ = struct.unpack("<III", head)
        x = read_exact(stream, 4 * n * bands)
        y = read_exact(stream, 8 * n)
        if x is None or y is None:
            break
        item = (torch.frombuffer(x, dtype=torch.float32).view(n, 1, bands),
                torch.frombuffer(y, dtype=torch.int64))
        while not stop.is_set():
            try:
                out.put(item, timeout=0.2)
                break
            except queue.Full:
                continue


class SpectralCNN(nn.Module):
    def __init__(self, bands, width, n_classes):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv1d(1, width, 9, padding=4), nn.GELU(), nn.MaxPool1d(2),
            nn.Conv1d(width, width, 7, padding=3), nn.GELU(), nn.MaxPool1d(2),
            nn.Conv1d(width, width, 5, padding=2), nn.GELU())
        self.head = nn.Sequential(nn.Linear(width * (bands // 4), 256), nn.GELU(),
                                  nn.Linear(256, n_classes))

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=DEFAULT_CONFIG)
    ap.add_argument("--steps", type=int, default=10**9)
    args = ap.parse_args()
    cfg = load_config(args.config)
    scan, tr = cfg["scan"], cfg["train"]

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    tmp = tempfile.mkdtemp(prefix="basalt-")
    decoder = None
    try:
        archive = os.path.join(tmp, "tray.scan")
        corescan.write_archive(archive, scan["rows"], scan["bands"])
        decoder = launcher.start_decoder(archive, tr["batch_size"], scan["hull_knots"],
                                         cfg["decoder"]["ld_binding"])
        q = queue.Queue(maxsize=tr["queue_depth"])
        reader = threading.Thread(target=batch_reader, name="batch-reader", daemon=True,
                                  args=(decoder.stdout, q, stop))
        reader.start()

        torch.set_num_threads(1)  # the decoder worker has the other core
        torch.manual_seed(0)
        model = SpectralCNN(scan["bands"], tr["width"], len(corescan.MINERALS))
        opt = torch.optim.AdamW(model.parameters(), lr=tr["lr"])
        step = 0
        while not stop.is_set() and step < args.steps:
            try:
                x, y = q.get(timeout=0.5)
            except queue.Empty:
                if decoder.poll() is not None and not stop.wait(0.5):
                    raise SystemExit("the decoder worker exited")
                continue
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
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
