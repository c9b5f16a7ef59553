"""Lithofacies classifier for glacial sediment cores (kame terraces, eskers and outwash fans).

Each record is one core section scanned by the multi-sensor core logger: gamma density, magnetic
susceptibility and XRF Fe and Ca counts, 4096 int16 samples per channel. Records are written to a scratch
shard at start-up and streamed back by a reader child (scanreader.py, O_DIRECT reads) under the block-I/O
limits of the profile's [io] table (iolimits.py); a pipe-reader thread turns them into batches."""
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
import tomllib

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import iolimits

HERE = os.path.dirname(os.path.abspath(__file__))
FACIES = ("till", "diamicton", "outwash-gravel", "sand", "laminated-silt", "varved-clay")
CHANNELS = 4
SAMPLES = 4096
HEADER = struct.Struct("<IIQ")
SCRATCH_PREFIX = "kame-scans-"


def sweep_scratch():
    root = tempfile.gettempdir()
    for name in os.listdir(root):
        if name.startswith(SCRATCH_PREFIX):
            owner = name[len(SCRATCH_PREFIX):].split("-")[0]
            if owner.isdigit() and int(owner) != os.getpid() and not os.path.exists(f"/proc/{owner}"):
                shutil.rmtree(os.path.join(root, name), ignore_errors=True)


def write_shard(path, n_records, seed):
    """Synthetic core scans: each facies has its own grain-size rhythm, density level and Fe/Ca ratio."""
    rng = np.random.default_rng(seed)
    t = np.arange(SAMPLES, dtype=np.float32) / SAMPLES
    with open(path, "wb") as f:
        for start in range(0, n_records, 256):
            k = min(256, n_records - start)
            labels = rng.integers(0, len(FACIES), size=k)
            period = (8 + 10 * labels)[:, None].astype(np.float32)
            phase = rng.uniform(0, 6.28, size=(k, 1)).astype(np.float32)
            rhythm = np.sin(6.28 * period * t[None, :] + phase)
            density = 1500 + 120 * labels[:, None] + 200 * rhythm
            magsus = 300 * np.abs(rhythm) * (labels[:, None] % 3 + 1)
            fe = 800 + 90 * labels[:, None] + 150 * np.roll(rhythm, 7, axis=1)
            ca = 900 - 70 * labels[:, None] + 120 * rhythm ** 2
            rec = np.stack([density, magsus, fe, ca], axis=1)
            rec += rng.normal(0, 60, size=rec.shape).astype(np.float32)
            rec = rec.astype(np.int16)
            rec[:, 0, 0] = labels
            f.write(rec.tobytes())
        f.flush()
        os.fsync(f.fileno())


class PipeBatches(threading.Thread):
    """Reads the reader child's frames from its stdout and turns them into training batches."""

    def __init__(self, stream, batch, record_bytes, depth, decimate):
        super().__init__(name="pipe-reader", daemon=True)
        self.stream, self.batch, self.record_bytes = stream, batch, record_bytes
        self.decimate = decimate
        self.q = queue.Queue(maxsize=depth)

    def _read_exact(self, n):
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self.stream.readinto(view[got:])
            if not k:
                raise EOFError("reader child closed its stdout")
            got += k
        return buf

    def run(self):
        try:
            while True:
                seq, crc, size = HEADER.unpack(self._read_exact(HEADER.size))
                raw = np.frombuffer(self._read_exact(size), dtype=np.int16).reshape(self.batch, CHANNELS, SAMPLES)
                labels = raw[:, 0, 0].astype(np.int64)
                x = raw.astype(np.float32)
                x[:, 0, 0] = x[:, 0, 1]
                x = x.reshape(self.batch, CHANNELS, SAMPLES // self.decimate, self.decimate).mean(axis=3)
                x = (x - x.mean(axis=2, keepdims=True)) / (x.std(axis=2, keepdims=True) + 1.0)
                self.q.put((x, labels))
        except (EOFError, ValueError, OSError):
            self.q.put(None)


class FaciesNet(nn.Module):
    def __init__(self, width, depth, n_classes):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv1d(CHANNELS, width, 7, stride=2, padding=3), nn.BatchNorm1d(width), nn.ReLU())
        layers = []
        for _ in range(depth):
            layers += [nn.Conv1d(width, width, 5, padding=2), nn.BatchNorm1d(width), nn.ReLU()]
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(2 * width, n_classes)

    def forward(self, x):
        h = self.body(self.stem(x))
        return self.head(torch.cat([h.mean(2), h.amax(2)], dim=1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/coreshed_dedicated.toml")
    args = ap.parse_args()
    with open(args.config, "rb") as f:
        cfg = tomllib.load(f)
    data, io_cfg, run = cfg["scans"], cfg["io"], cfg["train"]

    sweep_scratch()
    iolimits.sweep_stale()
    scratch = tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-")
    child, group = None, None
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        torch.manual_seed(run["seed"])
        torch.set_num_threads(run["threads"])
        shard = os.path.join(scratch, "section-000.scan")
        write_shard(shard, data["records"], data["seed"])
        record_bytes = CHANNELS * SAMPLES * 2

        group = iolimits.ReaderGroup(scratch, io_cfg["read_mbps"], io_cfg["write_mbps"]).create()
        child = subprocess.Popen([sys.executable, os.path.join(HERE, "scanreader.py"), "--shard", shard,
                                  "--record-bytes", str(record_bytes), "--batch", str(data["batch"])],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=HERE, bufsize=0)
        group.attach(child.pid)
        feeder = PipeBatches(child.stdout, data["batch"], record_bytes, data["prefetch"], data["decimate"])
        feeder.start()

        model = FaciesNet(run["width"], run["depth"], len(FACIES))
        opt = torch.optim.SGD(model.parameters(), lr=run["lr"], momentum=0.9, nesterov=True)
        step = 0
        while True:
            item = feeder.q.get()
            if item is None:
                raise RuntimeError("scan reader stopped")
            xs, labels = item
            x, y = torch.from_numpy(xs), torch.from_numpy(labels)
            logits = model(x)
            loss = F.cross_entropy(logits, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            acc = (logits.argmax(1) == y).float().mean().item()
            print(f"step {step} loss {loss.item():.4f} acc {acc:.3f}", flush=True)
            step += 1
    finally:
        if child is not None:
            try:
                child.stdin.close()
            except OSError:
                pass
            child.kill()
            child.wait()
        if group is not None:
            group.remove()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
