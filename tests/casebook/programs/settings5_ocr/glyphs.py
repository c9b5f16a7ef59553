"""Synthetic line-strip rendering for the OCR recogniser (numpy only)."""
import numpy as np

H, W, N_CLASSES = 32, 32, 36


def render_chunk(args):
    """Render `n` noisy glyph images; the label picks the stroke pattern."""
    seed, n = args
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, N_CLASSES, size=n)
    yy, xx = np.mgrid[0:H, 0:W].astype(np.float32)
    imgs = np.empty((n, H, W), np.float32)
    for i, lab in enumerate(labels):
        ang = np.pi * lab / N_CLASSES + rng.normal(0, 0.05)
        cx, cy = W / 2 + rng.normal(0, 2), H / 2 + rng.normal(0, 2)
        d = np.abs((xx - cx) * np.sin(ang) - (yy - cy) * np.cos(ang))
        ring = np.abs(np.hypot(xx - cx, yy - cy) - 4 - (lab % 6) * 1.5)
        img = np.exp(-d ** 2 / 2.0) + np.exp(-ring ** 2 / 1.5)
        imgs[i] = img + rng.normal(0, 0.1, size=(H, W))
    return imgs, labels
