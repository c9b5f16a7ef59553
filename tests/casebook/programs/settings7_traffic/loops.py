"""Inductive-loop detector archive: fixed-size records in one flat file."""
import os

import numpy as np

N_DETECTORS = 2048
WINDOW = 12          # 5-minute slots per sample
CHANNELS = 3         # flow, occupancy, speed
SLOT_BYTES = CHANNELS * 4


class LoopArchive:
    def __init__(self, root, n_days=4, seed=3):
        rng = np.random.default_rng(seed)
        self.slots = n_days * 288
        self.path = os.path.join(root, "loops.bin")
        data = rng.normal(0, 1, size=(N_DETECTORS, self.slots, CHANNELS)).astype(np.float32)
        data[..., 2] += np.sin(np.arange(self.slots) / 288 * 2 * np.pi)[None, :]
        data.tofile(self.path)
        self.fd = os.open(self.path, os.O_RDONLY)

    def slot(self, det, t):
        off = (det * self.slots + t) * SLOT_BYTES
        return np.frombuffer(os.pread(self.fd, SLOT_BYTES, off), dtype=np.float32)

    def sample(self, det, t0):
        rows = [self.slot(det, t0 + k) for k in range(WINDOW + 1)]
        x = np.concatenate(rows[:-1])
        y = rows[-1][2]
        return x, y

    def close(self):
        os.close(self.fd)
