import queue
import threading

import numpy as np
import torch

from catalogue import SightingCatalogue

SORT_KIND = {"any": "quicksort", "stable": "stable"}


class NegativeMiner(threading.Thread):
    """Ranks the whole reference catalogue for each new sighting and draws hard negatives by rank, then
    queues (query, positive, negatives) descriptor batches for the two-tower model."""

    def __init__(self, cfg, seed):
        super().__init__(name="negative-miner", daemon=True)
        self.cfg = cfg
        self.rng = np.random.default_rng(seed)
        self.out = queue.Queue(maxsize=cfg.mining.queue_depth)
        self.ready = threading.Event()
        self.stats_lock = threading.Lock()
        self.ranked = 0

    def rank_weights(self):
        m = self.cfg.mining
        r = np.arange(m.rank_low, m.rank_high, dtype=np.float64)
        w = r ** -m.rank_power
        return r.astype(np.int64), w / w.sum()

    def run(self):
        m = self.cfg.mining
        cat = SightingCatalogue(self.cfg)
        kind = SORT_KIND[m.tie_break]
        ranks, weights = self.rank_weights()
        self.ready.set()
        while True:
            feats, ref = cat.query(self.rng, m.queries_per_batch)
            scores = cat.scores(feats)
            order = np.argsort(-scores, axis=1, kind=kind)
            picks = self.rng.choice(ranks, size=(m.queries_per_batch, m.negatives), p=weights)
            neg = np.take_along_axis(order, picks, axis=1)
            # a negative that is the query's own reference (or the same species) is replaced by a random one
            same = cat.species[neg] == cat.species[ref][:, None]
            neg[same] = self.rng.integers(0, len(cat.features), size=int(same.sum()))
            q = torch.from_numpy(feats)
            items = torch.from_numpy(np.concatenate([cat.features[ref][:, None], cat.features[neg]], axis=1))
            with self.stats_lock:
                self.ranked += m.queries_per_batch
            self.out.put((q, items))
