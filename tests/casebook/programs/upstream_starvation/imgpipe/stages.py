import logging
import queue
import threading
from dataclasses import dataclass

import torch
import torch.nn as nn

from imgpipe.codec import decode_pixmap, make_shard

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PipeConfig:
    image_px: int = 64
    batch: int = 16
    shard_records: int = 24
    featurizers: int = 2
    raw_depth: int = 4
    feature_depth: int = 8
    feature_dim: int = 64


def ingest(cfg, raw_q):
    shard = make_shard(cfg.shard_records, cfg.image_px, cfg.image_px)
    i = 0
    while True:
        images = []
        for _ in range(cfg.batch):
            w, h, values = decode_pixmap(shard[i % len(shard)])
            pixels = torch.frombuffer(bytearray(values), dtype=torch.uint8)
            images.append(pixels.view(h, w, 3).permute(2, 0, 1))
            i += 1
        raw_q.put(torch.stack(images))


class Featurizer(threading.Thread):
    def __init__(self, idx, cfg, raw_q, feature_q):
        super().__init__(name=f"featurize-{idx}", daemon=True)
        self.cfg, self.raw_q, self.feature_q = cfg, raw_q, feature_q
        torch.manual_seed(idx)
        self.encoder = nn.Sequential(
            nn.Conv2d(3, 16, 5, stride=2), nn.GELU(), nn.Conv2d(16, 32, 3, stride=2), nn.GELU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, cfg.feature_dim)).eval()

    @torch.no_grad()
    def run(self):
        while True:
            images = self.raw_q.get()
            self.feature_q.put(self.encoder(images.float() / 255.0))


def start_pipeline(cfg):
    raw_q = queue.Queue(maxsize=cfg.raw_depth)
    feature_q = queue.Queue(maxsize=cfg.feature_depth)
    threading.Thread(target=ingest, args=(cfg, raw_q), name="ingest", daemon=True).start()
    for i in range(cfg.featurizers):
        Featurizer(i, cfg, raw_q, feature_q).start()
    log.info("pipeline started: 1 ingest, %d featurizers", cfg.featurizers)
    return feature_q
