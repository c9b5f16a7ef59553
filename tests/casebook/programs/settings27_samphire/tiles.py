"""Builds the survey's tile shards in a scratch directory: 640 x 640 8-bit aerial tiles of five
saltmarsh cover classes (samphire, cordgrass, mud, creek, sea lavender), one record per tile."""
import os
import shutil
import tempfile

import numpy as np

TILE = 640
RECORD = TILE * TILE + 8            # 8-byte header: class id, tile id
CLASSES = 5
PREFIX = "samphire-tiles-"


def sweep_stale():
    """Removes scratch directories left behind by runs that were killed."""
    root = tempfile.gettempdir()
    for name in os.listdir(root):
        if not name.startswith(PREFIX):
            continue
        owner = name[len(PREFIX):].split("-")[0]
        if owner.isdigit() and int(owner) != os.getpid() and not os.path.exists(f"/proc/{owner}"):
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)


def _texture(rng, cls, n):
    yy, xx = np.mgrid[0:TILE, 0:TILE].astype(np.float32) / TILE
    base = np.array([150, 95, 60, 35, 120], np.float32)[cls]
    freq = np.array([23.0, 9.0, 2.0, 1.0, 14.0], np.float32)[cls]
    out = np.empty((n, TILE, TILE), np.uint8)
    for i in range(n):
        phase = rng.uniform(0, 2 * np.pi, 2)
        pattern = np.sin(freq * 2 * np.pi * xx + phase[0]) * np.cos(freq * 1.3 * 2 * np.pi * yy + phase[1])
        img = base + 28.0 * pattern + rng.normal(0, 14.0, (TILE, TILE))
        out[i] = np.clip(img, 0, 255).astype(np.uint8)
    return out


def build(n_shards, per_shard, seed):
    """Writes the shards, syncs them and drops them from the page cache (the reader brings in what
    it reads). Returns (scratch dir, list of shard paths)."""
    scratch = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-")
    rng = np.random.default_rng(seed)
    protos = {c: _texture(rng, c, 12) for c in range(CLASSES)}
    paths = []
    for s in range(n_shards):
        path = os.path.join(scratch, f"shard-{s:03d}.tiles")
        with open(path, "wb") as f:
            for i in range(per_shard):
                cls = int(rng.integers(0, CLASSES))
                img = protos[cls][int(rng.integers(0, 12))]
                img = np.roll(img, int(rng.integers(0, TILE)), axis=int(rng.integers(0, 2)))
                f.write(np.array([cls, s * per_shard + i], np.int32).tobytes())
                f.write(img.tobytes())
            f.flush()
            os.fsync(f.fileno())
        fd = os.open(path, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
        paths.append(path)
    return scratch, paths
