"""Landform classifier (drumlin field / till plain / esker ridge) on airborne lidar patches.

A decoder worker (decoder.py, child process started inside the vendor-format sandbox of
sandbox.py) unpacks the survey's lidar tiles into 5-channel terrain patches and streams
them on a pipe; a reader thread, which also keeps a decoder running (it starts a new one
whenever the current one exits), turns the frames into batches, and the main thread
trains a small CNN.

    python train.py                              # configs/survey_intake.toml
    python train.py --config configs/survey_archive.toml
"""
import argparse
import os
import queue
import signal
import struct
import subprocess
import sys
import threading
import tomllib

import sandbox
import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CONFIG = os.path.join("configs", "survey_intake.toml")
CLASSES = 3


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


class DecoderPool:
    """Keeps one decoder worker running; a worker that exits is replaced by a new one."""

    def __init__(self, dc, sc):
        self.argv = [sys.executable, os.path.join(HERE, "decoder.py"), "--patches", str(dc["patches"]),
                     "--side", str(dc["side"]), "--tile", str(dc["tile"])]
        self.preexec = sandbox.limits_for(sc)
        self.proc = None
        self.started = 0
        self.lock = threading.Lock()

    def spawn(self):
        with self.lock:
            self.proc = subprocess.Popen(self.argv + ["--seed", str(self.started)], stdin=subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, preexec_fn=self.preexec)
            self.started += 1
            return self.proc

    def close(self):
        with self.lock:
            p = self.proc
        if p is not None and p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=3)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def frame_reader(pool, out, stop):
    while not stop.is_set():
        proc = pool.spawn()
        stream = proc.stdout
        while not stop.is_set():
            head = read_exact(stream, 12)
            if head is None:
                break
            n, ch, side = struct.unpack("<III", head)
            feats = read_exact(stream, 4 * n * ch * side * side)
            labels = read_exact(stream, 4 * n)
            if feats is None or labels is None:
                break
            x = torch.frombuffer(feats, dtype=torch.float32).view(n, ch, side, side)
            y = torch.frombuffer(labels, dtype=torch.int32).long()
            while not stop.is_set():
                try:
                    out.put((x, y), timeout=0.2)
                    break
                except queue.Full:
                    continue
        stream.close()
        proc.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=DEFAULT_CONFIG)
    ap.add_argument("--steps", type=int, default=10**9)
    args = ap.parse_args()
    cfg = load_config(args.config)
    dc, sc, tr = cfg["decoder"], cfg["sandbox"], cfg["train"]

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    torch.set_num_threads(1)
    torch.manual_seed(0)

    pool = DecoderPool(dc, sc)
    q = queue.Queue(maxsize=tr["queue_depth"])
    reader = threading.Thread(target=frame_reader, name="frame-reader", daemon=True, args=(pool, q, stop))
    try:
        reader.start()
        c = tr["channels"]
        model = nn.Sequential(nn.Conv2d(5, c, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(c, 2 * c, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(2 * c, 2 * c, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                              nn.Flatten(), nn.Linear(2 * c, CLASSES))
        opt = torch.optim.AdamW(model.parameters(), lr=tr["lr"])
        step = 0
        while not stop.is_set() and step < args.steps:
            try:
                x, y = q.get(timeout=0.5)
            except queue.Empty:
                if not reader.is_alive() and not stop.is_set():
                    raise SystemExit("the frame reader stopped") from None
                continue
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            print(f"step {step} loss {loss.item():.5f}", flush=True)
    finally:
        stop.set()
        pool.close()
        reader.join(timeout=5)
        pool.close()


if __name__ == "__main__":
    main()
