import queue
import threading

import numpy as np
import torch

from featurize import BeamGeometry, Featurizer
from radar import VolumeArchive


class ScanLoader(threading.Thread):
    def __init__(self, settings, seed):
        super().__init__(name="scan-loader", daemon=True)
        self.s = settings
        self.seed = seed
        self.out = queue.Queue(maxsize=settings.loader.queue_depth)
        self.ready = threading.Event()
        self.stats_lock = threading.Lock()
        self.volumes_done = 0
        self.feature_dim = None

    def run(self):
        s = self.s
        archive = VolumeArchive(s.archive)
        geometry = BeamGeometry(s.archive, s.features)
        featurize = Featurizer(geometry, s.features)
        rng = np.random.default_rng(self.seed)
        self.feature_dim = featurize(archive.volumes[:1]).shape[2]
        self.ready.set()
        while True:
            vol, labels = archive.draw(rng, s.loader.volumes_per_batch, s.loader.jitter)
            feats = featurize(vol)
            b, k, d = feats.shape
            x = torch.from_numpy(np.ascontiguousarray(feats.reshape(b * k, d), dtype=np.float32))
            x = (x - x.mean(0)) / (x.std(0) + 1e-3)
            y = torch.from_numpy(np.repeat(labels, k).astype(np.int64))
            with self.stats_lock:
                self.volumes_done += b
            self.out.put((x, y))
