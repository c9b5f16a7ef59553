"""Bot-traffic detector for customer web shops, trained on uploaded access logs.

At start-up a validator worker checks the uploaded archive; then a parser worker (child
process) featurizes random client sessions, a reader thread frames its output into
batches and the main thread trains an MLP classifier.

    python train.py                                       # configs/uploads_customer.toml
    python train.py --config configs/uploads_internal.toml
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
import tomllib

import torch
from torch import nn

import accesslog

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CONFIG = os.path.join("configs", "uploads_customer.toml")


def load_config(path):
    for cand in (path, os.path.join(HERE, path)):
        if os.path.exists(cand):
            with open(cand, "rb") as f:
                return tomllib.load(f)
    raise SystemExit(f"config not found: {path}")


def worker_cmd(mode, archive, profile, per_session, *extra):
    return [sys.executable, os.path.join(HERE, "logworker.py"), mode, "--parent", str(os.getpid()),
            "--archive", archive, "--hardening", profile, "--per-session", str(per_session), *extra]


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
        head = read_exact(stream, 8)
        if head is None:
            break
        n, d = struct.unpack("<II", head)
        x = read_exact(stream, 4 * n * d)
        y = read_exact(stream, 8 * n)
        if x is None or y is None:
            break
        item = (torch.frombuffer(x, dtype=torch.float32).view(n, d),
                torch.frombuffer(y, dtype=torch.int64))
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
    data, tr = cfg["data"], cfg["train"]
    per = data["lines_per_session"]

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    tmp = tempfile.mkdtemp(prefix="cobalt-")
    parser = None
    try:
        archive = os.path.join(tmp, "uploads.log")
        accesslog.write_archive(archive, data["clients"], per)
        check = subprocess.run(worker_cmd("validate", archive, cfg["validator"]["hardening"], per),
                               stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
        if check.returncode != 0:
            raise SystemExit(f"archive rejected: {check.stderr.strip() or check.stdout.strip()}")
        print(f"archive ok: {check.stdout.strip()} sessions", flush=True)

        parser = subprocess.Popen(worker_cmd("parse", archive, cfg["parser"]["hardening"], per,
                                             "--batch", str(tr["batch_size"])),
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
        q = queue.Queue(maxsize=tr["queue_depth"])
        reader = threading.Thread(target=batch_reader, name="batch-reader", daemon=True,
                                  args=(parser.stdout, q, stop))
        reader.start()

        torch.set_num_threads(1)  # the parser worker needs the other core
        torch.manual_seed(0)
        h = tr["hidden"]
        model = nn.Sequential(nn.Linear(accesslog.FEATURES, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(),
                              nn.Linear(h, 2))
        opt = torch.optim.Adam(model.parameters(), lr=tr["lr"])
        loss_fn = nn.CrossEntropyLoss()
        step = 0
        while not stop.is_set() and step < args.steps:
            try:
                x, y = q.get(timeout=0.5)
            except queue.Empty:
                if parser.poll() is not None and not stop.wait(0.5):
                    raise SystemExit("the parser worker exited")
                continue
            loss = loss_fn(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    finally:
        stop.set()
        if parser is not None and parser.poll() is None:
            parser.terminate()
            try:
                parser.wait(timeout=3)
            except subprocess.TimeoutExpired:
                parser.kill()
                parser.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
