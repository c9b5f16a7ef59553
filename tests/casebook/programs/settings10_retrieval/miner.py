"""Hard-negative mining for a dual-encoder: a pool of (hardness, passage) candidates ranked by a stale index's score.

Each query's candidates from the stale index enter the pool with their score; the pool keeps the hardest POOL_SIZE;
negatives are drawn from its hardest quantile by rank.
"""
import random

import numpy as np
import pool_profile

DIM = 64
N_PASSAGES = 60_000
POOL_SIZE = 40_000


class Corpus:
    def __init__(self, seed=5):
        rng = np.random.default_rng(seed)
        self.topics = rng.standard_normal((256, DIM)).astype(np.float32)
        self.topic_of = rng.integers(0, 256, N_PASSAGES)
        self.passages = (self.topics[self.topic_of] + 0.8 * rng.standard_normal((N_PASSAGES, DIM))).astype(np.float32)
        self.stale = self.passages + 0.3 * rng.standard_normal((N_PASSAGES, DIM)).astype(np.float32)


class HardNegativeMiner:
    def __init__(self, corpus, seed=9, candidates=12, hard_quantile=0.2):
        self.corpus = corpus
        self.rng = random.Random(seed)
        self.nprng = np.random.default_rng(seed)
        self.candidates = candidates
        self.hard_quantile = hard_quantile
        self.pool = pool_profile.new_pool(key=lambda item: item[0])
        for pid in self.nprng.integers(0, N_PASSAGES, POOL_SIZE).tolist():
            self.pool.add((self.rng.random() * 4.0, pid))

    def sample(self, batch):
        """-> (query topic ids, positive passage ids, hard negative passage ids)"""
        c = self.corpus
        topics = self.nprng.integers(0, 256, batch)
        queries = c.topics[topics]
        cand = self.nprng.integers(0, N_PASSAGES, (batch, self.candidates))
        scores = np.einsum("bd,bkd->bk", queries, c.stale[cand]) / np.sqrt(DIM)
        pool, rng = self.pool, self.rng
        positives, negatives = [], []
        for b, (row, srow) in enumerate(zip(cand.tolist(), scores.tolist(), strict=False)):
            for pid, s in zip(row, srow, strict=False):
                pool.add((s, pid))
                pool.pop(rng.randrange(len(pool) // 4))            # evict one of the easiest quarter
            lo = len(pool) - int(len(pool) * self.hard_quantile)
            t = int(topics[b])
            for _ in range(8):
                score, pid = pool[rng.randrange(lo, len(pool))]
                if c.topic_of[pid] != t:
                    break
            negatives.append(pid)
            positives.append(row[int(np.argmax(srow))])
        return topics, positives, negatives
