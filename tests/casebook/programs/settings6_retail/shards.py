# shards.py -- write the day's transaction extracts as gzip'd CSV, read them back
import gzip
import os
import subprocess

import numpy as np

ROWS_PER_SHARD = 96
N_SHARDS = 64


def write_extracts(root, n_items, seed=0):
    rng = np.random.default_rng(seed)
    paths = []
    for i in range(N_SHARDS):
        items = rng.integers(0, n_items, size=(ROWS_PER_SHARD, 8))
        qty = rng.integers(1, 5, size=ROWS_PER_SHARD)
        lines = [",".join(map(str, row)) + f",{q}" for row, q in zip(items, qty)]
        p = os.path.join(root, f"tx_{i:04d}.csv.gz")
        with gzip.open(p, "wt", compresslevel=6) as fh:
            fh.write("\n".join(lines))
        paths.append(p)
    return paths


def read_extract(path):
    # system gzip: much faster than the gzip module on the big production files
    out = subprocess.run(["gzip", "-dc", path], capture_output=True, check=True).stdout
    arr = np.array([[int(v) for v in ln.split(",")] for ln in out.decode().splitlines()], dtype=np.int64)
    return arr[:, :8], arr[:, 8]
