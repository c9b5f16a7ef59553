"""Synthetic permafrost borehole temperatures: depth profiles of daily ground temperature."""
import numpy as np

DEPTHS = 12
LOOKBACK = 16
HORIZON = 4


def make_series(n_sites, days, seed):
    rng = np.random.default_rng(seed)
    t = np.arange(days, dtype=np.float64)
    out = np.empty((n_sites, days, DEPTHS), dtype=np.float32)
    for s in range(n_sites):
        mean = rng.uniform(-6, -1)
        amp = rng.uniform(8, 16)
        trend = rng.uniform(0.0002, 0.001)
        for d in range(DEPTHS):
            damp = np.exp(-d / 4.0)
            lag = d * 9.0
            air = mean + trend * t + amp * damp * np.sin(2 * np.pi * (t - lag) / 365.25)
            out[s, :, d] = air + (0.3 + 1.2 * damp) * rng.standard_normal(days)
    return out


def windows(series, rng, n):
    sites = rng.integers(0, series.shape[0], size=n)
    starts = rng.integers(0, series.shape[1] - LOOKBACK - HORIZON, size=n)
    idx = starts[:, None] + np.arange(LOOKBACK + HORIZON)[None]
    w = series[sites[:, None], idx]                        # n, L+H, depths
    x = w[:, :LOOKBACK].reshape(n, -1)
    y = w[:, LOOKBACK:].reshape(n, -1)
    return x / 10.0, y / 10.0
