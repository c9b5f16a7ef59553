"""fastingest: a small record reader for compressed click logs.

Each Reader owns one decode thread that inflates blocks and turns them into float tensors. Background threads of a
library should not steal the CPU from whoever embeds it, so every thread this library starts lowers its own
scheduling priority first (``nice``), the way search and vector-index engines do for their background pools.
"""
from __future__ import annotations

import os
import queue
import struct
import threading
import time
import zlib

import torch

BACKGROUND_NICE = 19  # "as polite as possible": the library's default for its decode threads


def _lower_priority(nice: int) -> None:
    # Linux applies setpriority() to one thread when given its TID: only the calling thread becomes nicer.
    if nice > 0 and hasattr(os, "setpriority"):
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
        except OSError:
            pass


def make_blocks(n_blocks: int, rows: int, fields: int, seed: int = 0) -> list[bytes]:
    """Synthetic compressed blocks: `rows` records of `fields` little-endian floats each."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n_blocks):
        values = torch.randn(rows, fields, generator=g)
        values[:, 0] = (values[:, 1:9].sum(1) > 0).float()  # the click label
        raw = struct.pack(f"<{rows * fields}f", *values.flatten().tolist())
        out.append(zlib.compress(raw, 6))
    return out


class Reader:
    """Inflates blocks in a decode thread and serves (features, label) batches from a bounded queue."""

    def __init__(self, blocks: list[bytes], rows: int, fields: int, cross_dim: int = 256, depth: int = 4,
                 nice: int = BACKGROUND_NICE):
        self.blocks, self.rows, self.fields, self.nice = blocks, rows, fields, nice
        n = fields - 1
        # a fixed random projection of the pairwise field crosses (the log format's "hashed crosses")
        self.cross_proj = torch.randn(n * n, cross_dim, generator=torch.Generator().manual_seed(7)) / n
        self.out: queue.Queue = queue.Queue(maxsize=depth)
        self.thread = threading.Thread(target=self._decode_loop, name="fastingest-decode", daemon=True)

    def start(self) -> Reader:
        self.thread.start()
        return self

    def _decode_loop(self) -> None:
        _lower_priority(self.nice)
        i = 0
        while True:
            raw = zlib.decompress(self.blocks[i % len(self.blocks)])
            table = torch.frombuffer(bytearray(raw), dtype=torch.float32).view(self.rows, self.fields)
            label = table[:, 0].clone()
            feats = table[:, 1:]
            # per-field standardisation and a hashed cross feature, as the log format asks
            feats = (feats - feats.mean(0)) / (feats.std(0) + 1e-6)
            crosses = torch.sin(feats[:, :, None] * feats[:, None, :]).flatten(1)
            self.out.put((torch.cat([feats, crosses @ self.cross_proj], 1), label))
            i += 1

    def __iter__(self):
        while True:
            yield self.out.get()


class Heartbeat:
    """Writes a liveness line to a file every few seconds (also a background thread of the library)."""

    def __init__(self, path: str, every_s: float = 5.0, nice: int = BACKGROUND_NICE):
        self.path, self.every_s, self.nice = path, every_s, nice
        self.thread = threading.Thread(target=self._loop, name="fastingest-heartbeat", daemon=True)

    def start(self) -> Heartbeat:
        self.thread.start()
        return self

    def _loop(self) -> None:
        _lower_priority(self.nice)
        while True:
            with open(self.path, "w") as f:
                f.write(f"{time.time():.0f}\n")
            time.sleep(self.every_s)
