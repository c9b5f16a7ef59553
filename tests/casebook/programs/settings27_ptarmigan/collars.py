"""Synthetic collar uplink: tri-axial accelerometer bursts (3 x 128 int16 samples at 25 Hz) of
rock ptarmigan, each labelled with one of six behaviours, spooled one record per file by two capture
threads and read back, in order of arrival, by the loader thread."""
import queue
import struct
import threading

import numpy as np

BEHAVIOURS = ("foraging", "walking", "flying", "resting", "vigilance", "preening")
SAMPLES = 128
HEADER = struct.Struct("<IIHH")             # collar id, sequence, behaviour, samples


FREQ = np.array([1.5, 2.2, 6.0, 0.1, 0.4, 3.3])
AMP = np.array([0.4, 0.7, 1.6, 0.05, 0.15, 0.5])


def bursts(rng, kinds):
    """One uplink frame's worth of bursts (n x 3 x SAMPLES int16) for the given behaviours."""
    t = np.arange(SAMPLES) / 25.0
    phase = rng.uniform(0, 6.28, (len(kinds), 3, 1))
    x = AMP[kinds, None, None] * np.sin(2 * np.pi * FREQ[kinds, None, None] * t + phase)
    x[:, 2] += 1.0                                # gravity on the z axis
    x += rng.normal(0, 0.08, x.shape)
    return np.clip(x * 4096, -32767, 32767).astype("<i2")


class Capture(threading.Thread):
    def __init__(self, spool, arrivals, collar_ids, seed):
        super().__init__(name=f"capture-{seed}", daemon=True)
        self.spool, self.arrivals, self.ids, self.tag = spool, arrivals, collar_ids, seed
        self.rng = np.random.default_rng(seed)
        self.seq = 0

    def run(self):
        while True:                               # one uplink frame: 32 collar records
            collars = self.rng.integers(0, len(self.ids), 32)
            kinds = self.rng.integers(0, len(BEHAVIOURS), 32)
            data = bursts(self.rng, kinds)
            for c, k, b in zip(collars.tolist(), kinds.tolist(), data, strict=True):
                collar = self.ids[c]
                payload = HEADER.pack(collar, self.seq, k, SAMPLES) + b.tobytes()
                self.arrivals.put(self.spool.put(f"{collar:05d}.{self.tag}.{self.seq:09d}.rec", payload))
                self.seq += 1


class Loader(threading.Thread):
    def __init__(self, spool, arrivals, batch, depth):
        super().__init__(name="loader", daemon=True)
        self.spool, self.arrivals, self.batch = spool, arrivals, batch
        self.out = queue.Queue(maxsize=depth)
        self.batches = 0
        self._lock = threading.Lock()

    def run(self):
        import torch
        while True:
            xs, ys = [], []
            for _ in range(self.batch):
                raw = self.spool.take(self.arrivals.get())
                _, _, kind, n = HEADER.unpack_from(raw)
                xs.append(np.frombuffer(raw, "<i2", offset=HEADER.size).reshape(3, n))
                ys.append(kind)
            x = torch.from_numpy(np.stack(xs).astype(np.float32) / 4096.0)
            self.out.put((x, torch.tensor(ys)))
            with self._lock:
                self.batches += 1
