"""Synthetic airborne-LiDAR plot features for the tree-species classifier.

Each sample is one 20 m x 20 m plot: a normalised height histogram of the returns (48 bins),
intensity percentiles (16), return-number ratios (8) and a 24-band canopy gap profile,
drawn from one of six species mixtures (alder carr, birch, oak, pine, spruce, willow scrub).
"""
import numpy as np

SPECIES = ("alder", "birch", "oak", "pine", "spruce", "willow")
N_FEAT = 48 + 16 + 8 + 24


class PlotSampler:
    def __init__(self, seed, points=768):
        self.rng = np.random.default_rng(seed)
        self.points = points
        base = np.random.default_rng(1234)
        self.height_mu = base.uniform(14.0, 19.0, len(SPECIES))
        self.height_sd = base.uniform(4.0, 7.0, len(SPECIES))
        self.intensity_mu = base.uniform(90.0, 115.0, len(SPECIES))
        self.gap = base.uniform(0.25, 0.35, (len(SPECIES), 24))

    def plot(self, label):
        r = self.rng
        h = r.normal(self.height_mu[label], self.height_sd[label], self.points)
        h = np.concatenate([h, r.uniform(0.0, 2.0, self.points // 4)])   # ground / understorey returns
        hist = np.histogram(np.clip(h, 0, 47.9), bins=48, range=(0, 48))[0] / len(h)
        inten = r.gamma(4.0, self.intensity_mu[label] / 4.0, self.points)
        pct = np.percentile(inten, np.linspace(5, 95, 16)) / 200.0
        ret = r.dirichlet(np.full(8, 2.0) + label * 0.02)
        gap = np.clip(self.gap[label] + r.normal(0, 0.15, 24), 0, 1)
        return np.concatenate([hist, pct, ret, gap]).astype(np.float32)

    def batch(self, size):
        labels = self.rng.integers(0, len(SPECIES), size)
        x = np.stack([self.plot(int(k)) for k in labels])
        return x, labels.astype(np.int64)
