"""Synthetic credit-default rows and the streaming preprocessing used by train.py.

Numeric columns are drawn from a fixed random mixture, categorical columns from
Zipf-like distributions; the label depends on a hidden scorecard so the model has
something to learn.  Numeric columns are standardised with running statistics
that were "fitted" at start-up on a warm-up sample (like a scikit-learn
StandardScaler fitted on the first shard).
"""
import numpy as np

N_NUM = 14
CAT_CARD = (12, 7, 31, 5, 53, 9, 17, 4)


class CreditStream:
    def __init__(self, seed=0):
        self.rng = np.random.default_rng(seed)
        r = np.random.default_rng(1234)
        self.num_w = r.normal(0, 1, N_NUM)
        self.cat_w = [r.normal(0, 0.7, c) for c in CAT_CARD]
        self.mix_mu = r.normal(0, 2, (3, N_NUM))
        self.mix_sd = r.uniform(0.5, 2.0, (3, N_NUM))
        warm = self._raw(8192)[0]
        self.mu = warm.mean(0)
        self.sd = warm.std(0) + 1e-6

    def _raw(self, n):
        comp = self.rng.integers(0, 3, n)
        x = self.rng.normal(self.mix_mu[comp], self.mix_sd[comp])
        x[:, 3] = np.exp(np.clip(x[:, 3], -5, 5))        # income-like, skewed
        x[:, 7] = np.round(np.abs(x[:, 7]) * 3)           # count-like
        cats = np.stack([
            np.minimum(self.rng.zipf(1.6, n) - 1, c - 1) for c in CAT_CARD], 1)
        return x, cats

    def batch(self, n):
        x, cats = self._raw(n)
        score = np.tanh(x[:, :N_NUM] @ self.num_w / 6.0)
        for j, w in enumerate(self.cat_w):
            score = score + w[cats[:, j]] * 0.5
        p = 1.0 / (1.0 + np.exp(-(score - 0.3)))
        y = (self.rng.random(n) < p).astype(np.float32)
        xn = ((x - self.mu) / self.sd).astype(np.float32)
        xn = np.clip(xn, -6, 6)
        return xn, cats.astype(np.int64), y
