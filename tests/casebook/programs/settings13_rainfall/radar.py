"""Synthetic weather-radar reflectivity archive: rain cells (anisotropic Gaussian blobs with a growth/decay
cycle) advected by a per-storm steering wind over a 64 x 64 km grid at 1 km, one frame every 5 minutes, plus
clutter and noise. A training sample is 4 consecutive frames and the frame 15 minutes after the last one."""
import numpy as np

GRID = 64
HIST = 4
LEAD = 3                      # frames ahead (3 x 5 min)
SEQ = 12                      # frames per archived storm sequence
STATIONS = [f"{c}{n:02d}" for c in ("DE", "NL", "BE", "DK") for n in range(1, 13)]


def _storm(rng, yy, xx):
    n = int(rng.integers(3, 9))
    wind = rng.normal(0, 0.8, 2)
    cells = [(rng.uniform(0, GRID), rng.uniform(0, GRID), wind[0] + rng.normal(0, 0.15),
              wind[1] + rng.normal(0, 0.15), rng.uniform(2, 7), rng.uniform(2, 7), rng.uniform(20, 55),
              rng.uniform(-6, 6), rng.uniform(6, 18)) for _ in range(n)]
    seq = np.zeros((SEQ, GRID, GRID), np.float32)
    for t in range(SEQ):
        for cy, cx, vy, vx, sy, sx, peak, t0, life in cells:
            amp = peak * np.sin(np.pi * np.clip((t - t0) / life, 0.0, 1.0))
            if amp > 0:
                seq[t] += amp * np.exp(-0.5 * (((yy - cy - vy * t) / sy) ** 2 + ((xx - cx - vx * t) / sx) ** 2))
    return seq


class StormArchive:
    """The archive of storm sequences a radar site keeps (synthesised at start-up) and the sampler over it."""

    def __init__(self, n_storms, seed):
        self.rng = np.random.default_rng(seed)
        yy, xx = np.mgrid[0:GRID, 0:GRID].astype(np.float32)
        self.seqs = np.stack([_storm(self.rng, yy, xx) for _ in range(n_storms)])     # [S, SEQ, G, G] dBZ
        self.clutter = (self.rng.random((len(STATIONS), GRID, GRID)) < 0.004).astype(np.float32) * 30

    def batch(self, n):
        rng = self.rng
        s = rng.integers(0, len(self.seqs), n)
        t = rng.integers(0, SEQ - HIST - LEAD + 1, n)
        st = rng.integers(0, len(STATIONS), n)
        idx = t[:, None] + np.r_[np.arange(HIST), HIST - 1 + LEAD][None, :]
        frames = self.seqs[s[:, None], idx]                                                # [n, 5, G, G]
        frames[:, :HIST] += self.clutter[st][:, None]
        frames[:, :HIST] += rng.normal(0, 0.8, (n, HIST, GRID, GRID)).astype(np.float32)
        k = int(rng.integers(4))
        frames = np.rot90(frames, k, axes=(2, 3))
        frames = np.ascontiguousarray(np.clip(frames, 0, 70) / np.float32(70))
        meta = [{"station": STATIONS[i], "storm": int(a), "t0": int(b)} for i, a, b in zip(st, s, t)]
        return frames[:, :HIST], frames[:, HIST:], meta
