"""Synthetic gearbox accelerometer archive: int16 counts, three axes per sensor."""
import numpy as np

FAULTS = ("healthy", "inner_race", "outer_race", "ball", "cage")


def make_archive(n_windows, length, seed=7):
    rng = np.random.default_rng(seed)
    t = np.arange(length, dtype=np.float64) / 12800.0
    labels = rng.integers(0, len(FAULTS), n_windows)
    raw = np.empty((n_windows, 3, length), dtype=np.int16)
    shaft = rng.uniform(20.0, 30.0, n_windows)
    for i in range(n_windows):
        f0 = shaft[i]
        sig = 0.6 * np.sin(2 * np.pi * f0 * t)[None, :] * rng.uniform(0.5, 1.5, (3, 1))
        if labels[i]:
            defect = f0 * (3.1 + 1.7 * labels[i])
            bursts = (np.sin(2 * np.pi * defect * t) > 0.97).astype(np.float64)
            sig = sig + 0.8 * bursts[None, :] * np.sin(2 * np.pi * 3100.0 * t)[None, :]
        sig = sig + 0.3 * rng.standard_normal((3, length))
        raw[i] = np.clip(sig * 6000.0, -32000, 32000).astype(np.int16)
    gain = rng.uniform(0.9, 1.1, 3).astype(np.float32) / 6000.0
    offset = rng.uniform(-40, 40, 3).astype(np.float32)
    return raw, labels.astype(np.int64), gain, offset
