import numpy as np

N_BEAMS = 16
N_BINS = 48
CLASSES = ("rock", "mine", "wreck", "clutter")


def echo_batch(rng, size):
    labels = rng.integers(0, len(CLASSES), size=size)
    t = np.linspace(0.0, 1.0, N_BINS, dtype=np.float32)
    base = np.stack([np.sin((k + 2) * 6.0 * t) for k in range(len(CLASSES))])
    x = base[labels][:, None, :] * rng.uniform(0.5, 1.5, size=(size, N_BEAMS, 1)).astype(np.float32)
    x += rng.normal(0, 0.6, size=x.shape).astype(np.float32)
    return x.reshape(size, -1).astype(np.float32), labels.astype(np.int64)
