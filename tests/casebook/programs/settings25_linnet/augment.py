import queue
import threading

import numpy as np
import torch

from songs import SongCatalogue
from teacher import build_teacher, continue_songs


class SongAugmenter(threading.Thread):
    """Draws recorded song fragments from the catalogue, lets the teacher continue each one and queues
    (fragment + continuation, song type) batches for the student."""

    def __init__(self, cfg, seed):
        super().__init__(name="song-augmenter", daemon=True)
        self.cfg = cfg
        self.rng = np.random.default_rng(seed)
        self.out = queue.Queue(maxsize=cfg.augment.queue_depth)
        self.ready = threading.Event()
        self.stats_lock = threading.Lock()
        self.songs = 0

    def run(self):
        c, a = self.cfg.corpus, self.cfg.augment
        torch.manual_seed(self.cfg.train.seed + 101)
        catalogue = SongCatalogue(c.syllables, c.song_types, c.seed)
        model, gen = build_teacher(self.cfg, catalogue, self.rng)
        self.ready.set()
        while True:
            seq, types = catalogue.sample(self.rng, a.prompts_per_batch, c.prompt_len)
            full = continue_songs(model, gen, torch.from_numpy(seq))
            x = full.clone()
            # drop a few recorded syllables (missed detections in the field recordings)
            drop = torch.from_numpy(self.rng.random(x.shape) < 0.05)
            drop[:, c.prompt_len:] = False
            x[drop] = 0
            y = torch.from_numpy(types.astype(np.int64))
            with self.stats_lock:
                self.songs += len(y)
            self.out.put((x, y))
