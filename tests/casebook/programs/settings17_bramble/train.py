"""Pollution-episode classifier trained from the live station archive.

An ingest worker (child process) keeps appending station-days to the SQLite archive,
a loader thread samples training batches from it, the main thread trains an MLP and
records progress in the run ledger.

    python train.py                                     # configs/archive_shared.toml
    python train.py --config configs/archive_local.toml
"""
import argparse
import os
import queue
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import tomllib

import numpy as np
import torch
from torch import nn

import airstore

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CONFIG = os.path.join("configs", "archive_shared.toml")


def load_config(path):
    for cand in (path, os.path.join(HERE, path)):
        if os.path.exists(cand):
            with open(cand, "rb") as f:
                return tomllib.load(f)
    raise SystemExit(f"config not found: {path}")


def start_ingest(db, store, ing):
    return subprocess.Popen(
        [sys.executable, os.path.join(HERE, "ingest.py"), "--parent", str(os.getpid()),
         "--db", db, "--journal-mode", store["journal_mode"], "--timeout", str(store["busy_timeout_s"]),
         "--rows", str(ing["rows_per_commit"]), "--every-ms", str(ing["commit_every_ms"]),
         "--retention", str(ing["retention_rows"])], stdin=subprocess.DEVNULL)


def loader(db, store, tr, out, stop, errors):
    con = airstore.connect(db, store["journal_mode"], store["busy_timeout_s"])
    rng = np.random.default_rng(1)
    try:
        while not stop.is_set():
            x, y = airstore.sample_batch(con, rng, tr["queries_per_batch"], tr["rows_per_query"])
            item = (torch.from_numpy(x), torch.from_numpy(y))
            while not stop.is_set():
                try:
                    out.put(item, timeout=0.2)
                    break
                except queue.Full:
                    continue
    except sqlite3.Error as exc:
        errors.append(repr(exc))
    finally:
        con.close()


class Ledger:
    """Run ledger: one row per checkpoint of the training curve (small, rarely written)."""

    def __init__(self, path):
        self.con = sqlite3.connect(path, timeout=10)
        self.con.execute("PRAGMA journal_mode = delete")
        self.con.execute("CREATE TABLE IF NOT EXISTS curve (step INTEGER, loss REAL, t REAL)")

    def record(self, step, loss):
        with self.con:
            self.con.execute("INSERT INTO curve VALUES (?, ?, ?)", (step, loss, time.time()))

    def close(self):
        self.con.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=DEFAULT_CONFIG)
    ap.add_argument("--steps", type=int, default=10**9)
    args = ap.parse_args()
    cfg = load_config(args.config)
    store, tr = cfg["store"], cfg["train"]

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    tmp = tempfile.mkdtemp(prefix="bramble-")
    ingest = ledger = None
    try:
        db = os.path.join(tmp, "archive.sqlite")
        airstore.create(db, store["journal_mode"], cfg["ingest"]["retention_rows"])
        ledger = Ledger(os.path.join(tmp, "ledger.sqlite"))
        ingest = start_ingest(db, store, cfg["ingest"])

        q = queue.Queue(maxsize=tr["queue_depth"])
        errors = []
        t = threading.Thread(target=loader, name="archive-loader", daemon=True,
                             args=(db, store, tr, q, stop, errors))
        t.start()

        torch.set_num_threads(1)  # the ingest worker and the loader thread need the other core
        torch.manual_seed(0)
        h = tr["hidden"]
        model = nn.Sequential(nn.Linear(airstore.FEATURES, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(),
                              nn.Linear(h, airstore.CLASSES))
        opt = torch.optim.Adam(model.parameters(), lr=tr["lr"])
        loss_fn = nn.CrossEntropyLoss()
        step = 0
        while not stop.is_set() and step < args.steps:
            try:
                x, y = q.get(timeout=0.5)
            except queue.Empty:
                if not t.is_alive() and not stop.wait(0.5):
                    raise SystemExit(f"loader stopped: {errors[-1:]}")
                if ingest.poll() is not None and not stop.is_set():
                    raise SystemExit("ingest worker exited")
                continue
            loss = loss_fn(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step % tr["ledger_every"] == 0:
                ledger.record(step, loss.item())
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    finally:
        stop.set()
        if ingest is not None and ingest.poll() is None:
            ingest.terminate()
            try:
                ingest.wait(timeout=3)
            except subprocess.TimeoutExpired:
                ingest.kill()
                ingest.wait()
        if ledger is not None:
            ledger.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
