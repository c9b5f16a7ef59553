"""Facies classifier for lake-sediment cores: predicts the sedimentary facies of each
2 mm scan step from its XRF element profile (centred log-ratios) and depth.

The XRF export parser runs as a worker process (launcher.start_parser) and writes binary
frames on a pipe; a frame-reader thread turns them into batches; the main thread trains
an MLP.

    python train.py                                  # configs/corelab_qa.toml
    python train.py --config configs/corelab_prod.toml
"""
import argparse
import os
import queue
import signal
import struct
import subprocess
import threading
import tomllib

import torch
from torch import nn

import launcher

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CONFIG = os.path.join("configs", "corelab_qa.toml")
FACIES = 5


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


def frame_reader(stream, out, stop):
    while not stop.is_set():
        head = read_exact(stream, 12)
        if head is None:
            return
        n, n_feat, _ = struct.unpack("<III", head)
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


def clr_features(x):
    """Centred log-ratios of the element counts (compositional data), depth kept as is."""
    logs = torch.log(x[:, :-1])
    return torch.cat([logs - logs.mean(dim=1, keepdim=True), x[:, -1:]], dim=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=DEFAULT_CONFIG)
    ap.add_argument("--steps", type=int, default=10**9)
    args = ap.parse_args()
    cfg = load_config(args.config)
    sc, tr = cfg["scanner"], cfg["train"]

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    parser = launcher.start_parser(sc, cfg["worker"])
    try:
        q = queue.Queue(maxsize=tr["queue_depth"])
        reader = threading.Thread(target=frame_reader, name="frame-reader", daemon=True,
                                  args=(parser.stdout, q, stop))
        reader.start()

        torch.set_num_threads(1)
        torch.manual_seed(0)
        n_in, h = sc["elements"] + 1, tr["hidden"]
        model = nn.Sequential(nn.Linear(n_in, h), nn.GELU(), nn.Linear(h, h), nn.GELU(),
                              nn.Linear(h, FACIES))
        opt = torch.optim.AdamW(model.parameters(), lr=tr["lr"])
        step = 0
        while not stop.is_set() and step < args.steps:
            try:
                x, y = q.get(timeout=0.5)
            except queue.Empty:
                if parser.poll() is not None and not stop.wait(0.5):
                    raise SystemExit("the XRF export parser exited")
                continue
            loss = nn.functional.cross_entropy(model(clr_features(x)), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            print(f"step {step} loss {loss.item():.5f}", flush=True)
    finally:
        stop.set()
        if parser.poll() is None:
            parser.terminate()
            try:
                parser.wait(timeout=3)
            except subprocess.TimeoutExpired:
                parser.kill()
                parser.wait()


if __name__ == "__main__":
    main()
