"""Vessel-behaviour classifier for a coastal AIS monitoring service: labels 32-fix
track segments as transit, loitering, AIS dark gap or position jump (spoofing).

The vendor's feed adapter (a child process) parses the AIS spool into kinematic
features; a syscall auditor watches the adapter as the data-handling policy asks; a
reader thread frames the adapter's output into batches; the main thread trains a GRU.

    python train.py                                      # configs/audit_full.toml
    python train.py --config configs/audit_onboarding.toml
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

import aisfeed

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CONFIG = os.path.join("configs", "audit_full.toml")


def load_config(path):
    for cand in (path, os.path.join(HERE, path)):
        if os.path.exists(cand):
            with open(cand, "rb") as f:
                return tomllib.load(f)
    raise SystemExit(f"config not found: {path}")


def start_adapter(spool, batch):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.Popen(
        [sys.executable, os.path.join(HERE, "parser.py"), "--parent", str(os.getpid()),
         "--spool", spool, "--batch", str(batch)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=env)


def start_auditor(adapter_pid, audit, report):
    return subprocess.Popen(
        [sys.executable, os.path.join(HERE, "audit.py"), "--parent", str(os.getpid()),
         "--pid", str(adapter_pid), "--mode", audit["mode"],
         "--window", str(audit["startup_window_s"]), "--report", report],
        stdin=subprocess.DEVNULL)


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
        n, t, f = struct.unpack("<III", head)
        x = read_exact(stream, 4 * n * t * f)
        y = read_exact(stream, 8 * n)
        if x is None or y is None:
            break
        item = (torch.frombuffer(x, dtype=torch.float32).view(n, t, f),
                torch.frombuffer(y, dtype=torch.int64))
        while not stop.is_set():
            try:
                out.put(item, timeout=0.2)
                break
            except queue.Full:
                continue


class TrackGRU(nn.Module):
    def __init__(self, n_feat, hidden, n_classes):
        super().__init__()
        self.inp = nn.Linear(n_feat, hidden)
        self.gru = nn.GRU(hidden, hidden, batch_first=True)
        self.head = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.GELU(),
                                  nn.Linear(hidden, n_classes))

    def forward(self, x):
        h, last = self.gru(torch.tanh(self.inp(x)))
        return self.head(torch.cat([last[0], h.amax(dim=1)], dim=1))


def stop_proc(p):
    if p is not None and p.poll() is None:
        p.terminate()
        try:
            p.wait(timeout=3)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


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

    tmp = tempfile.mkdtemp(prefix="fjord-")
    adapter = auditor = None
    try:
        spool = os.path.join(tmp, "ais.spool")
        aisfeed.write_spool(spool, feed["segments"])
        adapter = start_adapter(spool, tr["batch_size"])
        auditor = start_auditor(adapter.pid, cfg["audit"], os.path.join(tmp, "audit.json"))
        q = queue.Queue(maxsize=tr["queue_depth"])
        reader = threading.Thread(target=batch_reader, name="batch-reader", daemon=True,
                                  args=(adapter.stdout, q, stop))
        reader.start()

        torch.set_num_threads(1)
        torch.manual_seed(0)
        model = TrackGRU(6, tr["hidden"], len(aisfeed.BEHAVIOURS))
        opt = torch.optim.AdamW(model.parameters(), lr=tr["lr"])
        step = 0
        while not stop.is_set() and step < args.steps:
            try:
                x, y = q.get(timeout=0.5)
            except queue.Empty:
                if adapter.poll() is not None and not stop.wait(0.5):
                    raise SystemExit("the feed adapter exited")
                continue
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            print(f"step {step} loss {loss.item():.5f}", flush=True)
    finally:
        stop.set()
        stop_proc(adapter)
        stop_proc(auditor)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
