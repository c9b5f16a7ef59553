"""Vessel-type classifier from AIS track segments (cargo / tanker / fishing / passenger / tug / pleasure).

    start-up           the day's receiver shards are staged into a scratch directory (synthetic here)
    2 decoder threads  each owns half the shards: reads a shard, groups its reports by vessel, cuts each vessel's
                       track into 32-report segments (one progress bar per decoder), queues batches
    main thread        trains a conv-stem MLP over the segments

usage: python train.py [--run-profile console|batch] [--batch 128] [--steps N]
"""
import argparse
import os
import sys

import runtime_profile


def parse(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--run-profile", choices=sorted(runtime_profile.PROFILES), default="console")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--vessels-per-shard", type=int, default=400)
    ap.add_argument("--steps", type=int, default=1 << 50)
    ap.add_argument("--lr", type=float, default=1e-3)
    return ap.parse_args(argv)


ARGS = parse()
runtime_profile.apply(ARGS.run_profile)          # before tqdm is imported

import queue  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
from tqdm import tqdm  # noqa: E402

import ais  # noqa: E402
from statusboard import StatusBoard  # noqa: E402


class SegmentDecoder(threading.Thread):
    def __init__(self, k, paths, out, board, batch, stop):
        super().__init__(name=f"ais-decoder-{k}", daemon=True)
        self.k, self.paths, self.out, self.board, self.batch, self.stop = k, paths, out, board, batch, stop
        self.pending_x, self.pending_y = [], []

    def _emit(self):
        x = torch.from_numpy(np.stack(self.pending_x[:self.batch]))
        y = torch.tensor(self.pending_y[:self.batch])
        del self.pending_x[:self.batch], self.pending_y[:self.batch]
        while not self.stop.is_set():
            try:
                self.out.put((x, y), timeout=0.5)
                return
            except queue.Full:
                pass

    def run(self):
        sink = self.board.slot(self.k)
        epoch = 0
        while not self.stop.is_set():
            for path in self.paths:
                recs = np.fromfile(path, dtype=ais.AIS)
                feats, tracks, dt = ais.shard_features(recs)
                bar = tqdm(tracks, desc=f"{os.path.basename(path)} e{epoch}", unit="vessel", position=self.k,
                           leave=False, file=sink)
                for lo, hi, vtype in bar:
                    segs = ais.segments(feats, dt, lo, hi)
                    self.pending_x.extend(segs)
                    self.pending_y.extend([vtype] * len(segs))
                    if len(self.pending_x) >= self.batch:
                        self._emit()
                    if self.stop.is_set():
                        break
                bar.close()
                if self.stop.is_set():
                    return
            epoch += 1


class TrackNet(nn.Module):
    """Strided conv stem over time, then an MLP over the flattened stem output."""

    def __init__(self, stem=32, hidden=384, classes=len(ais.VESSEL_TYPES)):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv1d(ais.N_FEAT, stem, 5, stride=2, padding=2), nn.GELU())
        self.mlp = nn.Sequential(nn.Flatten(), nn.Linear(stem * ais.SEG // 2, hidden), nn.GELU(),
                                 nn.Dropout(0.1), nn.Linear(hidden, hidden), nn.GELU(), nn.Linear(hidden, classes))

    def forward(self, x):                       # x: [B, SEG, F]
        return self.mlp(self.stem(x.transpose(1, 2)))


def main():
    torch.set_num_threads(1)
    torch.manual_seed(1)
    stop = threading.Event()

    def handle(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        stop.set()
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)

    scratch = board = steps_bar = None
    decoders = []
    try:
        scratch = tempfile.mkdtemp(prefix="ais-stage-")
        paths = ais.write_shards(scratch, ARGS.shards, ARGS.vessels_per_shard)
        board = StatusBoard(os.path.join(scratch, "status.txt"), rows=3)
        batches = queue.Queue(maxsize=4)
        decoders = [SegmentDecoder(k, paths[k::2], batches, board, ARGS.batch, stop) for k in range(2)]
        for d in decoders:
            d.start()

        model = TrackNet()
        opt = torch.optim.AdamW(model.parameters(), lr=ARGS.lr, foreach=True)
        steps_bar = tqdm(total=None, desc="train", unit="step", position=2, file=board.slot(2), mininterval=1.0)
        step, t0, s0 = 0, time.perf_counter(), 0
        while step < ARGS.steps:
            try:
                x, y = batches.get(timeout=2.0)
            except queue.Empty:
                if not all(d.is_alive() for d in decoders):
                    raise RuntimeError("a segment decoder died")
                continue
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            steps_bar.update()
            if step % 25 == 0:
                now = time.perf_counter()
                print(f"step {step} loss {loss.item():.4f} rate {(step - s0) / (now - t0):.1f}/s", flush=True)
                t0, s0 = now, step
    finally:
        stop.set()
        for d in decoders:
            d.join(timeout=2)
        if steps_bar is not None:
            steps_bar.close()
        if board is not None:
            board.close()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
