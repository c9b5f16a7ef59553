import queue
import threading

import numpy as np
import torch

from catalog import ClipCatalog


class SiteBatchLoader(threading.Thread):
    def __init__(self, cat_settings, load_settings, seed):
        super().__init__(name="site-loader", daemon=True)
        self.cs = cat_settings
        self.ls = load_settings
        self.out = queue.Queue(maxsize=load_settings.queue_depth)
        self.ready = threading.Event()
        self.seed = seed
        self.count_lock = threading.Lock()
        self.batches = 0
        self.rows_seen = 0

    def run(self):
        catalog = ClipCatalog(self.cs)
        self.ready.set()
        rng = np.random.default_rng(self.seed)
        while True:
            site = int(rng.integers(0, self.cs.sites))
            rows = catalog.site_rows(site, 0.2)
            if len(rows) < self.ls.min_clips:
                continue
            arr = np.asarray(rows, dtype=np.float64)
            if self.ls.shuffle:
                arr = arr[rng.permutation(len(arr))]
            ids = arr[:, 0].astype(np.int64)
            emb = catalog.embeddings[ids]
            side = np.stack([
                np.log1p(arr[:, 1]), arr[:, 2] / 10.0, arr[:, 3], arr[:, 4] / 5.0, arr[:, 6],
            ], axis=1).astype(np.float32)
            x = torch.from_numpy(np.concatenate([emb, side], axis=1))
            y = torch.from_numpy(arr[:, 5].astype(np.int64))
            with self.count_lock:
                self.batches += 1
                self.rows_seen += len(rows)
            self.out.put((x, y))
