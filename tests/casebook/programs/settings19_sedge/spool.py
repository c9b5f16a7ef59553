"""The specimen spool: one small file per digitised herbarium sheet thumbnail,
b'HRBM' + <II height, width> + 4 reserved bytes + uint8 RGB pixels, and the label
(one of the network's sedge species groups) in the file name."""
import os
import shutil
import struct
import tempfile

import numpy as np

SPECIES = 6
PREFIX = "herbarium-spool-"


def sweep_stale():
    tmp = tempfile.gettempdir()
    for name in os.listdir(tmp):
        if not name.startswith(PREFIX):
            continue
        try:
            owner = int(name[len(PREFIX):])
        except ValueError:
            continue
        if not os.path.exists(f"/proc/{owner}"):
            shutil.rmtree(os.path.join(tmp, name), ignore_errors=True)


def build(n, size, seed=3):
    """Writes n specimen thumbnails into a fresh spool directory; returns
    (run_dir, spool_dir, [(path, label)])."""
    run_dir = os.path.join(tempfile.gettempdir(), f"{PREFIX}{os.getpid()}")
    spool_dir = os.path.join(run_dir, "spool")
    os.makedirs(spool_dir, exist_ok=True)
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size] / size
    items = []
    for i in range(n):
        label = int(rng.integers(SPECIES))
        angle = label * np.pi / SPECIES + rng.normal(0, 0.15)
        stems = 0.5 + 0.5 * np.sin(18 * (xx * np.cos(angle) + yy * np.sin(angle)))
        img = np.stack([0.3 * stems, 0.5 + 0.4 * stems, 0.2 * stems], axis=-1)
        img = np.clip(img + rng.normal(0, 0.08, img.shape), 0, 1)
        path = os.path.join(spool_dir, f"sheet{i:05d}_sp{label}.hrb")
        with open(path, "wb") as f:
            f.write(b"HRBM" + struct.pack("<II", size, size) + b"\0" * 4)
            f.write((img * 255).astype(np.uint8).tobytes())
        items.append((path, label))
    return run_dir, spool_dir, items


def remove(run_dir):
    shutil.rmtree(run_dir, ignore_errors=True)
