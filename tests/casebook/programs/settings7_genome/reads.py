"""Sharded read store: one small .seq file per read (2-bit packed k-mer counts)."""
import os

import numpy as np

K = 4
FEATS = 4 ** K
BASES = np.array(list("ACGT"))


def build_store(root, n_reads=3000, length=150, seed=0):
    rng = np.random.default_rng(seed)
    paths, labels = [], []
    for i in range(n_reads):
        label = i % 5
        p = np.full(4, 0.25)
        p[label % 4] += 0.1 * (1 + label // 4)
        p /= p.sum()
        seq = rng.choice(4, size=length, p=p).astype(np.uint8)
        shard = os.path.join(root, f"shard{i % 16:02d}", "reads")
        os.makedirs(shard, exist_ok=True)
        path = os.path.join(shard, f"r{i:05d}.seq")
        with open(path, "wb") as f:
            f.write(seq.tobytes())
        paths.append(path)
        labels.append(label)
    return paths, np.array(labels)


def kmer_profile(path):
    with open(path, "rb") as f:
        seq = np.frombuffer(f.read(), dtype=np.uint8).astype(np.int64)
    idx = seq[:-3] * 64 + seq[1:-2] * 16 + seq[2:-1] * 4 + seq[3:]
    return np.bincount(idx, minlength=FEATS).astype(np.float32) / len(idx)
