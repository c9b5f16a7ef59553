"""Rockfall / earthquake / noise classifier for a slope-monitoring geophone array.

A waveform decoder worker (child process, decoder.py) windows the geophone records and
writes their spectral features on a pipe; at start-up it is put into a cgroup of its own
with the profile's CPU limit (limits.confine); a frame-reader thread turns the frames into
batches and the main thread trains an MLP.

    python train.py                                  # configs/shared_node.toml
    python train.py --config configs/dedicated_node.toml
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

import torch
from torch import nn

import limits

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CONFIG = os.path.join("configs", "shared_node.toml")
CLASSES = 4
N_BANDS = 32


def load_config(path):
    for cand in (path, os.path.join(HERE, path)):
        if os.path.exists(cand):
            with open(cand, "rb") as f:
                return tomllib.load(f)
    raise SystemExit(f"config not found: {path}")


def start_decoder(st):
    return subprocess.Popen(
        [sys.executable, os.path.join(HERE, "decoder.py"), "--parent", str(os.getpid()),
         "--channels", str(st["channels"]), "--window", str(st["window"]),
         "--batch", str(st["windows_per_batch"])],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)


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


def frame_reader(stream, out, stop):
    while not stop.is_set():
        head = read_exact(stream, 8)
        if head is None:
            return
        n, n_feat = struct.unpack("<II", head)
        feats = read_exact(stream, 4 * n * n_feat)
        labels = read_exact(stream, 4 * n)
        if feats is None or labels is None:
            return
        x = torch.frombuffer(feats, dtype=torch.float32).view(n, n_feat)
        y = torch.frombuffer(labels, dtype=torch.int32).long()
        while not stop.is_set():
            try:
                out.put((x, y), timeout=0.2)
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

    limits.sweep_stale()
    decoder = start_decoder(st)
    cgroup = limits.confine(decoder.pid, cfg["limits"])
    try:
        q = queue.Queue(maxsize=tr["queue_depth"])
        reader = threading.Thread(target=frame_reader, name="frame-reader", daemon=True,
                                  args=(decoder.stdout, q, stop))
        reader.start()

        torch.set_num_threads(1)
        torch.manual_seed(0)
        n_in, h = st["channels"] * (N_BANDS + 2), tr["hidden"]
        model = nn.Sequential(nn.LayerNorm(n_in), nn.Linear(n_in, h), nn.GELU(),
                              nn.Linear(h, h), nn.GELU(), nn.Linear(h, h), nn.GELU(),
                              nn.Linear(h, CLASSES))
        opt = torch.optim.AdamW(model.parameters(), lr=tr["lr"])
        step = 0
        while not stop.is_set() and step < args.steps:
            try:
                x, y = q.get(timeout=0.5)
            except queue.Empty:
                if decoder.poll() is not None and not stop.wait(0.5):
                    raise SystemExit("the waveform decoder exited")
                continue
            loss = nn.functional.cross_entropy(model(x), y)
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
        limits.release(cgroup)


if __name__ == "__main__":
    main()
