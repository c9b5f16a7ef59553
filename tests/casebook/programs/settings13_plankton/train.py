"""Plankton classifier for a flow-cell imager (six kinds), trained on the instrument's ROI stream.

    flowcell thread   reads ROIs off the imager (synthetic: a pool of imaged particles made at start-up, each
                      emitted with a fresh offset/orientation; the trigger repeats some ROIs) in chunks of 32
    dedup thread      keys every ROI by a fingerprint of its bytes (fingerprint.make_hasher, algorithm from the
                      imager profile), drops the ones seen in the last `window` ROIs, bins the rest 4x4 to
                      56 x 56 and queues batches
    main thread       trains a small CNN on them

The instrument settings (pool size, fingerprint algorithm, de-duplication window, batch size) come from a TOML
imager profile, --profile.

usage: python train.py [--profile configs/imager_lims.toml] [--steps N]

The LIMS profile keys the window with SHA3-512, a cryptographic digest a few hundred times slower than xxHash
(XXH3), which is what non-security fingerprinting usually takes; public reports of the cost:
elastic/beats#15080, rstudio/shiny#2160, apache/hamilton#1630, ethereum/execution-specs#2404,
wabbajack-tools/wabbajack#130, computational-cell-analytics/micro-sam#284.
"""
import argparse
import collections
import hashlib
import os
import queue
import signal
import threading
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import fingerprint
import imager

HERE = os.path.dirname(os.path.abspath(__file__))


def cli():
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default=os.path.join(HERE, "configs", "imager_lims.toml"))
    ap.add_argument("--steps", type=int, default=2 ** 62)
    ap.add_argument("--lr", type=float, default=2e-3)
    return ap.parse_args()


def put(q, item, stop):
    while not stop.is_set():
        try:
            q.put(item, timeout=0.5)
            return True
        except queue.Full:
            pass
    return False


class FlowCellReader(threading.Thread):
    def __init__(self, cell, chunk, out, stop):
        super().__init__(name="flowcell", daemon=True)
        self.cell, self.chunk, self.out, self.stop = cell, chunk, out, stop

    def run(self):
        while not self.stop.is_set():
            if not put(self.out, self.cell.rois(self.chunk), self.stop):
                return


class Deduplicator(threading.Thread):
    def __init__(self, cfg, inbox, out, stop):
        super().__init__(name="dedup", daemon=True)
        self.digest = fingerprint.make_hasher(cfg["fingerprint"]["algorithm"])
        self.window_size = cfg["fingerprint"]["window"]
        self.batch = cfg["batches"]["size"]
        self.inbox, self.out, self.stop = inbox, out, stop
        self.window = collections.OrderedDict()
        self.lock = threading.Lock()                 # the trainer reads the counters for its log line
        self.kept = self.dropped = 0
        self.error = None

    def seen(self, key):
        with self.lock:
            if key in self.window:
                self.window.move_to_end(key)
                self.dropped += 1
                return True
            self.window[key] = None
            if len(self.window) > self.window_size:
                self.window.popitem(last=False)
            self.kept += 1
            return False

    def run(self):
        rois, labels = [], []
        try:
            while not self.stop.is_set():
                try:
                    chunk = self.inbox.get(timeout=0.5)
                except queue.Empty:
                    continue
                for roi, label in chunk:
                    if self.seen(self.digest(roi)):
                        continue
                    rois.append(roi)
                    labels.append(label)
                    if len(rois) == self.batch:
                        x = np.stack(rois).reshape(self.batch, 56, 4, 56, 4).mean((2, 4), dtype=np.float32)
                        x = torch.from_numpy((x - 20.0) / 60.0).unsqueeze(1)
                        if not put(self.out, (x, torch.tensor(labels)), self.stop):
                            return
                        rois, labels = [], []
        except Exception as exc:        # noqa: BLE001 - reported by the main thread
            self.error = exc


class PlanktonNet(nn.Module):
    def __init__(self, classes=len(imager.KINDS)):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 5, stride=2, padding=2), nn.GELU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.GELU(),
            nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.GELU(),
            nn.AdaptiveAvgPool2d(2), nn.Flatten())
        self.head = nn.Sequential(nn.Linear(256, 128), nn.GELU(), nn.Linear(128, classes))

    def forward(self, x):
        return self.head(self.features(x))


class Interrupted(BaseException):
    pass


def main():
    args = cli()
    if not os.path.isabs(args.profile) and not os.path.exists(args.profile):
        args.profile = os.path.join(HERE, args.profile)        # relative to the program's folder
    cfg = fingerprint.load_profile(args.profile)
    torch.set_num_threads(1)
    torch.manual_seed(0)

    def on_signal(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise Interrupted()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    stop = threading.Event()
    threads = []
    try:
        cell = imager.FlowCell(cfg["flowcell"]["particles"], seed=5)
        run_id = hashlib.sha256(cell.pool[:8].tobytes()).hexdigest()[:12]     # names the run in the LIMS
        print(f"run {run_id}: {len(cell.pool)} particles, fingerprint {cfg['fingerprint']['algorithm']}",
              flush=True)
        raw = queue.Queue(maxsize=8)
        batches = queue.Queue(maxsize=cfg["batches"]["queue_depth"])
        reader = FlowCellReader(cell, cfg["flowcell"]["chunk"], raw, stop)
        dedup = Deduplicator(cfg, raw, batches, stop)
        threads = [reader, dedup]
        for t in threads:
            t.start()

        model = PlanktonNet()
        opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
        step, tick, tick_step = 0, time.monotonic(), 0
        while step < args.steps:
            try:
                x, y = batches.get(timeout=2.0)
            except queue.Empty:
                if dedup.error is not None or not all(t.is_alive() for t in threads):
                    raise RuntimeError(f"ROI pipeline stopped: {dedup.error!r}")
                continue
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step % 25 == 0:
                now = time.monotonic()
                with dedup.lock:
                    dup = dedup.dropped / max(1, dedup.kept + dedup.dropped)
                print(f"step {step} loss {loss.item():.4f} rate {(step - tick_step) / (now - tick):.1f}/s "
                      f"dup {dup:.1%}", flush=True)
                tick, tick_step = now, step
    except Interrupted:
        print("interrupted, stopping the imager threads", flush=True)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=2)


if __name__ == "__main__":
    main()
