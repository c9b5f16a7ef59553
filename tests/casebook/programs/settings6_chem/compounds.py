"""Toy compound library: random fingerprints + a smooth synthetic property."""
import hashlib

import numpy as np

FP_BITS = 512


class Library:
    def __init__(self, n=20000, seed=11):
        rng = np.random.default_rng(seed)
        self.fps = (rng.random((n, FP_BITS)) < 0.06).astype(np.float32)
        w = rng.normal(0, 1, FP_BITS).astype(np.float32)
        self.y = np.tanh(self.fps @ w / 6.0).astype(np.float32)
        self.ids = [f"CPD-{i:06d}" for i in range(n)]

    def __len__(self):
        return len(self.ids)

    def digest(self, i):
        return hashlib.blake2b(self.fps[i].tobytes(), digest_size=8).hexdigest()
