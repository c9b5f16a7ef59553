import numpy as np


class SceneBank:
    """Synthetic multispectral dryland scenes (blue, green, red, NIR, SWIR1, SWIR2) with a land-cover map."""

    def __init__(self, scenes, bands, size, classes, seed):
        rng = np.random.default_rng(seed)
        signatures = rng.uniform(0.05, 0.6, size=(classes, bands)).astype(np.float32)
        signatures[:, 3] += np.linspace(0.0, 0.35, classes, dtype=np.float32)  # NIR rises with vegetation
        self.cover = np.empty((scenes, size, size), dtype=np.int64)
        self.images = np.empty((scenes, bands, size, size), dtype=np.float32)
        yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / size
        for i in range(scenes):
            f = sum(np.sin(2 * np.pi * (rng.uniform(0.5, 3) * xx + rng.uniform(0.5, 3) * yy + rng.uniform()))
                    for _ in range(4))
            cover = np.clip(((f - f.min()) / (np.ptp(f) + 1e-6) * classes).astype(np.int64), 0, classes - 1)
            self.cover[i] = cover
            img = signatures[cover].transpose(2, 0, 1)
            self.images[i] = img * rng.uniform(0.9, 1.1) + rng.normal(0, 0.01, size=img.shape).astype(np.float32)


def spectral_indices(x):
    blue, green, red, nir, sw1, sw2 = (x[:, i] for i in range(6))
    eps = 1e-4
    ndvi = (nir - red) / (nir + red + eps)
    savi = 1.5 * (nir - red) / (nir + red + 0.5)
    ndmi = (nir - sw1) / (nir + sw1 + eps)
    nbr = (nir - sw2) / (nir + sw2 + eps)
    bsi = ((sw1 + red) - (nir + blue)) / ((sw1 + red) + (nir + blue) + eps)
    return np.stack([ndvi, savi, ndmi, nbr, bsi], axis=1)
