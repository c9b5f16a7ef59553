"""Synthetic GPS/TDR dive profiles of foraging fulmars and the producer thread that batches them."""
import queue
import threading

import numpy as np

BEHAVIOURS = ("commute", "search", "surface-feed", "plunge", "raft", "scavenge")


def make_profile(rng, label, length):
    t = np.linspace(0.0, 1.0, length, dtype=np.float32)
    speed = rng.gamma(2.0 + label, 1.5, size=length).astype(np.float32)
    heading = np.cumsum(rng.normal(0.0, 0.05 * (1 + label), size=length)).astype(np.float32)
    depth = np.zeros(length, dtype=np.float32)
    n_dives = rng.integers(label, 2 * label + 3)
    for _ in range(n_dives):
        c = rng.integers(0, length)
        w = rng.integers(3, 12)
        depth[max(0, c - w):c + w] += rng.uniform(0.2, 1.0) * (label + 1)
    wet = (depth > 0.1).astype(np.float32) + 0.05 * rng.normal(size=length).astype(np.float32)
    x = np.stack([speed, np.sin(heading), np.cos(heading), depth, wet,
                  np.sin(6.28 * t * (label + 1)).astype(np.float32)], axis=0)
    x += rng.normal(0.0, 0.1, size=x.shape).astype(np.float32)
    return x


class TrackFeeder(threading.Thread):
    """Producer: draws batches of dive profiles and puts them on a bounded queue."""

    def __init__(self, batch, length, depth, seed):
        super().__init__(name="track-feeder", daemon=True)
        self.batch, self.length = batch, length
        self.q = queue.Queue(maxsize=depth)
        self.rng = np.random.default_rng(seed)
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            labels = self.rng.integers(0, len(BEHAVIOURS), size=self.batch)
            xs = np.stack([make_profile(self.rng, int(k), self.length) for k in labels])
            xs = (xs - xs.mean(axis=2, keepdims=True)) / (xs.std(axis=2, keepdims=True) + 1e-3)
            while not self.stop.is_set():
                try:
                    self.q.put((xs, labels), timeout=0.5)
                    break
                except queue.Full:
                    continue
