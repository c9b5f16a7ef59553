"""Synthetic station records: hourly temperature/pressure/humidity/wind."""
import math
import random

import numpy as np

N_VARS = 6
WINDOW = 48


def make_station(rng, hours):
    base = rng.uniform(-5, 25)
    amp = rng.uniform(2, 12)
    t = np.arange(hours, dtype=np.float32)
    temp = base + amp * np.sin(2 * np.pi * t / 24.0) + rng.normalvariate(0, 1) * np.cos(t / 97.0)
    press = 1013 + 8 * np.sin(t / 53.0 + rng.random()) + np.random.default_rng(rng.randrange(1 << 30)).normal(0, 0.7, hours)
    hum = 60 + 25 * np.sin(t / 31.0 + 1.3)
    wind = np.abs(5 + 4 * np.sin(t / 17.0 + rng.random()))
    return np.stack([temp, press, hum, wind]).astype(np.float32)


def window_features(series, start):
    """Per-sample feature engineering (as in the old pandas pipeline)."""
    win = series[:, start:start + WINDOW]
    feats = []
    for h in range(WINDOW):
        hour = (start + h) % 24
        row = [float(v) for v in win[:, h]]
        row.append(math.sin(2 * math.pi * hour / 24.0))
        row.append(math.cos(2 * math.pi * hour / 24.0))
        feats.append(row)
    target = float(series[0, start + WINDOW])
    return feats, target
