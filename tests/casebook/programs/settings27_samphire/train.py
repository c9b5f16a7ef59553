"""Saltmarsh cover classifier trained on random crops of aerial survey tiles.

The tiles live in shard files in a scratch directory; a reader child (reader.py) running under a
memory cgroup of its own serves random crops over a pipe; a frame thread normalises them and queues batches."""
import argparse
import os
import queue
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time

import marshcfg
import memcg
import numpy as np
import tiles

HERE = os.path.dirname(os.path.abspath(__file__))


def read_exact(stream, n):
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = stream.readinto(view[got:])
        if not k:
            raise EOFError("tile reader closed its pipe")
        got += k
    return buf


class FrameThread(threading.Thread):
    """Reads crop frames from the reader child and turns them into training batches."""

    def __init__(self, stream, depth, seed):
        super().__init__(name="frame-reader", daemon=True)
        self.stream = stream
        self.out = queue.Queue(maxsize=depth)
        self.rng = np.random.default_rng(seed)
        self.frames = 0
        self.error = None

    def run(self):
        import torch
        try:
            while True:
                n, c = struct.unpack("<II", read_exact(self.stream, 8))
                raw = np.frombuffer(read_exact(self.stream, n * (8 + c * c)), np.uint8).reshape(n, 8 + c * c)
                labels = raw[:, :8].copy().view(np.int32)[:, 0]
                x = raw[:, 8:].reshape(n, c, c).astype(np.float32)
                if self.rng.random() < 0.5:
                    x = x[:, :, ::-1]
                x = x.reshape(n, c // 2, 2, c // 2, 2).mean(axis=(2, 4))
                x = (x - 110.0) / 45.0
                self.out.put((torch.from_numpy(x[:, None].copy()), torch.from_numpy(labels.astype(np.int64))))
                self.frames += 1
        except Exception as e:
            self.error = e
            self.out.put(None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/marsh_survey.toml")
    args = ap.parse_args()
    cfg = marshcfg.load(args.config)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))

    tiles.sweep_stale()
    memcg.sweep_stale()
    t0 = time.perf_counter()
    scratch, paths = tiles.build(cfg.shards.count, cfg.shards.tiles_per_shard, cfg.shards.seed)
    group, reader = None, None
    try:
        group = memcg.create(cfg.reader.memory_limit_mb, cfg.reader.swappiness)
        reader = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "reader.py"), "--tiles", str(cfg.train.batch),
             "--crop", str(cfg.train.crop), "--seed", str(cfg.shards.seed), *paths],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, preexec_fn=memcg.joiner(group),
            env={**os.environ, "OMP_NUM_THREADS": "1"})
        size_mb = sum(os.path.getsize(p) for p in paths) / 2**20
        print(f"{cfg.name}: {len(paths)} shards, {size_mb:.0f} MB in {time.perf_counter() - t0:.1f}s; "
              f"reader {reader.pid} in {group}", flush=True)

        import torch
        import torch.nn as nn

        torch.set_num_threads(cfg.train.threads)
        torch.manual_seed(cfg.train.seed)
        frames = FrameThread(reader.stdout, cfg.train.prefetch, cfg.shards.seed + 1)
        frames.start()
        ch = cfg.train.channels
        model = nn.Sequential(
            nn.Conv2d(1, ch, 3, padding=1), nn.BatchNorm2d(ch), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(ch, 2 * ch, 3, padding=1), nn.BatchNorm2d(2 * ch), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(2 * ch, 2 * ch, 3, padding=1), nn.BatchNorm2d(2 * ch), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2 * ch, tiles.CLASSES))
        opt = torch.optim.AdamW(model.parameters(), lr=cfg.train.lr)
        loss_fn = nn.CrossEntropyLoss()
        step, last = 0, time.perf_counter()
        while True:
            item = frames.out.get()
            if item is None:
                raise SystemExit(f"tile reader failed: {frames.error}")
            x, y = item
            loss = loss_fn(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            now = time.perf_counter()
            extra = f" reader_mem {memcg.usage_mb(group):.0f}MB" if group and step % 100 == 0 else ""
            print(f"step {step} loss {loss.item():.4f} dt {1000 * (now - last):.1f}ms{extra}", flush=True)
            last = now
    finally:
        if reader is not None and reader.poll() is None:
            reader.terminate()
            try:
                reader.wait(timeout=5)
            except subprocess.TimeoutExpired:
                reader.kill()
                reader.wait()
        memcg.remove(group)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
