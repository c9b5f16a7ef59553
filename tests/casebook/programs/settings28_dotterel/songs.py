"""Synthetic dotterel song bouts: one feature vector per syllable (duration, pitch contour, spectral shape).

Bout lengths follow the long-tailed distribution of the field recordings: most bouts have a few dozen
syllables, a few run to well over a hundred. Batches are padded to their longest bout."""
import numpy as np

FEATURES = 24
CALL_TYPES = ("trill", "peep", "display", "alarm", "contact", "chick")


def draw_bout(rng, max_len):
    kind = int(rng.integers(0, len(CALL_TYPES)))
    n = int(np.clip(rng.lognormal(2.8, 0.9), 6, max_len))
    t = np.arange(n, dtype=np.float32)[:, None]
    base = rng.normal(0.0, 1.0, size=(1, FEATURES)).astype(np.float32)
    motif = np.sin(t * (0.15 + 0.1 * kind) + np.arange(FEATURES, dtype=np.float32)[None, :] * 0.3)
    x = base + (0.5 + 0.2 * kind) * motif + rng.normal(0.0, 0.3, size=(n, FEATURES)).astype(np.float32)
    return x.astype(np.float32), kind


def padded_batch(rng, batch, max_len):
    bouts = [draw_bout(rng, max_len) for _ in range(batch)]
    longest = max(len(b) for b, _ in bouts)
    x = np.zeros((batch, longest, FEATURES), dtype=np.float32)
    pad = np.ones((batch, longest), dtype=bool)
    for i, (b, _) in enumerate(bouts):
        x[i, :len(b)] = b
        pad[i, :len(b)] = False
    kinds = np.array([k for _, k in bouts], dtype=np.int64)
    return x, pad, kinds
