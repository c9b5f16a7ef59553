"""CPU augmentations, run in a worker process so that the main process keeps its GIL for the model."""
import math
import random

SIDE = 28


def elastic_warp(pixels, rng, alpha=2.5):
    """Displaces every pixel by a smooth random field (pure Python: no OpenCV on the cluster image)."""
    phase_x, phase_y = rng.random() * 6.28, rng.random() * 6.28
    out = [0.0] * (SIDE * SIDE)
    for y in range(SIDE):
        for x in range(SIDE):
            dx = alpha * math.sin(y / 3.0 + phase_x)
            dy = alpha * math.cos(x / 3.0 + phase_y)
            sx = min(SIDE - 1, max(0, int(round(x + dx))))
            sy = min(SIDE - 1, max(0, int(round(y + dy))))
            out[y * SIDE + x] = pixels[sy * SIDE + sx]
    return out


def make_augmented_batch(seed, batch_size):
    rng = random.Random(seed)
    batch = []
    for _ in range(batch_size):
        digit = [rng.random() for _ in range(SIDE * SIDE)]
        batch.append(elastic_warp(digit, rng))
    return batch
