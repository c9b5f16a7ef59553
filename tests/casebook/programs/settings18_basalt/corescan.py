"""Synthetic drill-core hyperspectral scan archive (SWIR line scanner, uint16 counts)."""
import numpy as np

MINERALS = ("plagioclase", "pyroxene", "olivine", "chlorite", "smectite", "calcite")
HEADER = b"CORESCAN1\0"


def write_archive(path, n_rows, n_bands, seed=11):
    rng = np.random.default_rng(seed)
    wl = np.linspace(1000.0, 2500.0, n_bands)
    centres = np.array([1250.0, 1050.0, 1900.0, 2330.0, 2200.0, 2340.0])
    labels = rng.integers(0, len(MINERALS), n_rows).astype(np.uint8)
    dark = rng.uniform(180, 220, n_bands)
    white = dark + rng.uniform(9000, 11000, n_bands)
    with open(path, "wb") as f:
        f.write(HEADER)
        np.array([n_rows, n_bands], dtype=np.uint32).tofile(f)
        dark.astype(np.float32).tofile(f)
        white.astype(np.float32).tofile(f)
        for start in range(0, n_rows, 1024):
            lab = labels[start:start + 1024]
            base = 0.55 + 0.15 * np.sin(wl[None, :] / 400.0 + rng.uniform(0, 6, (len(lab), 1)))
            depth = rng.uniform(0.1, 0.35, (len(lab), 1))
            width = rng.uniform(30, 80, (len(lab), 1))
            band = np.exp(-0.5 * ((wl[None, :] - centres[lab][:, None]) / width) ** 2)
            refl = base * (1 - depth * band)
            refl += 0.01 * rng.standard_normal(refl.shape)
            counts = dark[None, :] + refl * (white - dark)[None, :]
            np.clip(counts, 0, 65535).astype(np.uint16).tofile(f)
        labels.tofile(f)
    return n_rows
