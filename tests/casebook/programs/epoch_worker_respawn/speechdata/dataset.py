"""Keyword-spotting clips read from a sharded manifest. Each loader worker opens the shard index itself (file
handles and index objects do not survive pickling), in worker_init_fn."""
import random

import torch
from torch.utils.data import Dataset, get_worker_info

CLIP_SAMPLES = 1600
N_SHARDS = 64
ENTRIES_PER_SHARD = 2500


def open_shard_index(seed):
    # Parse the manifest: one (shard, offset, label) entry per clip, with a lookup from clip key to entry.
    rng = random.Random(seed)
    index = {}
    for shard in range(N_SHARDS):
        for i in range(ENTRIES_PER_SHARD):
            key = f"spk{rng.randrange(900):03d}/{shard:02d}-{i:05d}"
            index[key] = (shard, i * CLIP_SAMPLES, rng.randrange(12))
    return index


def worker_init(worker_id):
    info = get_worker_info()
    info.dataset.index = open_shard_index(seed=0)
    info.dataset.keys = sorted(info.dataset.index)


class KeywordClips(Dataset):
    def __init__(self, n_clips):
        self.n_clips = n_clips
        self.index = None
        self.keys = None

    def __len__(self):
        return self.n_clips

    def __getitem__(self, i):
        shard, offset, label = self.index[self.keys[i % len(self.keys)]]
        g = torch.Generator().manual_seed(shard * 100003 + offset)
        return torch.randn(CLIP_SAMPLES, generator=g), label
