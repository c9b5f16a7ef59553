import queue
import random
import threading

import numpy as np
import torch

from reports import parse_report


class ReportFeeder(threading.Thread):
    """Hands every batch of raw reports to the parser pool and queues (features, regime) batches."""

    def __init__(self, cfg, pool, archive, seed):
        super().__init__(name="report-feeder", daemon=True)
        self.cfg = cfg
        self.pool = pool
        self.archive = archive
        self.rnd = random.Random(seed)
        self.out = queue.Queue(maxsize=cfg.pool.queue_depth)
        self.count_lock = threading.Lock()
        self.parsed = 0

    def run(self):
        p = self.cfg.pool
        while True:
            batch = self.rnd.choices(self.archive, k=p.reports_per_batch)
            rows = list(self.pool.imap(parse_report, batch, chunksize=p.chunksize))
            x = np.array([f for f, _ in rows], dtype=np.float32)
            y = np.array([r for _, r in rows], dtype=np.int64)
            with self.count_lock:
                self.parsed += len(rows)
            self.out.put((torch.from_numpy(x), torch.from_numpy(y)))
