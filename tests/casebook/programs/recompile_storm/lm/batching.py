from __future__ import annotations

import queue
import random
import threading

import torch


class Batcher:
    """Packs random 'documents' into batches whose length is the longest document (no padding buckets)."""

    def __init__(self, vocab: int) -> None:
        self.vocab = vocab
        self.rng = random.Random(0)

    def fill(self, out: queue.Queue, stop: threading.Event) -> None:
        while not stop.is_set():
            length = self.rng.randint(24, 160)
            tokens = torch.randint(0, self.vocab, (2, length))
            out.put(tokens)
