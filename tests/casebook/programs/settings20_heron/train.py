"""Session-intent classifier for a web shop's clickstream.

A session decoder worker (child process, decoder.py) pads and pools raw sessions and
writes their features on a pipe; it locks its memory as the profile says (memlock.lock).
A frame-reader thread turns the frames into batches and the main thread trains an MLP.

    python train.py                                   # configs/capture_rt.toml
    python train.py --config configs/capture_batch.toml
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

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CONFIG = os.path.join("configs", "capture_rt.toml")
CLASSES = 4


def load_config(path):
    for cand in (path, os.path.join(HERE, path)):
        if os.path.exists(cand):
            with open(cand, "rb") as f:
                return tomllib.load(f)
    raise SystemExit(f"config not found: {path}")


def start_decoder(dc):
    return subprocess.Popen(
        [sys.executable, os.path.join(HERE, "decoder.py"), "--parent", str(os.getpid()),
         "--memlock", dc["memlock"], "--batch", str(dc["sessions_per_batch"]),
         "--max-events", str(dc["max_events"]), "--dim", str(dc["event_dim"])],
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
    dc, tr = cfg["decoder"], cfg["train"]

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    decoder = start_decoder(dc)
    try:
        q = queue.Queue(maxsize=tr["queue_depth"])
        reader = threading.Thread(target=frame_reader, name="frame-reader", daemon=True,
                                  args=(decoder.stdout, q, stop))
        reader.start()
        torch.set_num_threads(1)
        torch.manual_seed(0)
        n_in, h = 3 * dc["event_dim"], tr["hidden"]
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
                    raise SystemExit("the session decoder exited")
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


if __name__ == "__main__":
    main()
