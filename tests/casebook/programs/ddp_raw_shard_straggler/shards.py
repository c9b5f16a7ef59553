"""Per-rank shards of a review-sentiment corpus.

Most shards were pre-tokenized and filtered into a tensor cache; one shard (``RAW_SHARDS``) was added late and only
exists as a raw dump, so the rank that owns it tokenizes on the fly, character by character in Python, and drops
the short and duplicate reviews that the preprocessing job had filtered out of the cache (most of them). Nothing
fails: that rank is simply slower per batch than the others, which then wait for it in every all_reduce
(modelled on NVIDIA/nccl#701, "one GPU showed up 4ms later than its peers", and pytorch/pytorch#59433).
"""
import random

import torch

VOCAB = 4096
SEQ = 64
WORDS = ["good", "bad", "great", "awful", "fine", "plot", "actor", "boring", "fun", "slow", "loved", "hated",
         "movie", "scene", "ending", "music", "the", "a", "was", "and", "not", "very", "really", "too"]
POSITIVE = {"good", "great", "fine", "fun", "loved"}
RAW_SHARDS = {2}
MIN_WORDS = 55  # the preprocessing job's length filter


def _review(rng, min_words=20):
    words = [rng.choice(WORDS) for _ in range(rng.randint(min_words, 60))]
    label = int(sum(w in POSITIVE for w in words) * len(WORDS) > len(POSITIVE) * len(words))
    return " ".join(words), label


def tokenize(text):
    """Hash every character trigram of every word (slow on purpose: pure Python, per character)."""
    ids = []
    for word in text.split():
        padded = f"<{word}>"
        for i in range(len(padded) - 2):
            h = 0
            for ch in padded[i:i + 3]:
                h = (h * 131 + ord(ch)) % 1_000_003
            ids.append(h % VOCAB)
    ids = ids[:SEQ] + [0] * max(0, SEQ - len(ids))
    return ids


class Shard:
    def __init__(self, rank, batch_size, seed=0):
        self.rank, self.batch_size = rank, batch_size
        self.rng = random.Random(seed + rank)
        self.raw = rank in RAW_SHARDS
        if not self.raw:
            # the tensor cache: built once, like loading the .pt file written by the preprocessing job
            reviews = [_review(self.rng, min_words=MIN_WORDS) for _ in range(2048)]
            self.cache_ids = torch.tensor([tokenize(t) for t, _ in reviews])
            self.cache_labels = torch.tensor([y for _, y in reviews])

    def __iter__(self):
        g = torch.Generator().manual_seed(100 + self.rank)
        while True:
            if self.raw:
                ids, labels, seen = [], [], set()
                while len(ids) < self.batch_size:
                    text, label = _review(self.rng, min_words=5)
                    tokens = tokenize(text)
                    key = tuple(tokens[:16])
                    if len(text.split()) < MIN_WORDS or key in seen:
                        continue
                    seen.add(key)
                    ids.append(tokens)
                    labels.append(label)
                yield torch.tensor(ids), torch.tensor(labels)
            else:
                idx = torch.randint(0, len(self.cache_ids), (self.batch_size,), generator=g)
                yield self.cache_ids[idx], self.cache_labels[idx]
