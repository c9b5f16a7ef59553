#!/usr/bin/env python
"""Fits a linear-probe head on frozen image features streamed by imgpipe."""
import logging
import threading
import time

import torch
import torch.nn as nn

from imgpipe.stages import PipeConfig, start_pipeline

logging.basicConfig(level=logging.INFO, format="[%(levelname)s %(threadName)s] %(message)s")
log = logging.getLogger("fit")


def fit(cfg, feature_q):
    head = nn.Sequential(nn.Linear(cfg.feature_dim, 256), nn.ReLU(), nn.Linear(256, 10))
    opt = torch.optim.Adam(head.parameters(), lr=1e-3)
    seen, t0 = 0, time.monotonic()
    while True:
        feats = feature_q.get()
        labels = torch.randint(0, 10, (feats.shape[0],))
        loss = nn.functional.cross_entropy(head(feats), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        seen += 1
        if seen % 10 == 0:
            log.info("batches %d (%.1f/s) loss %.3f", seen, seen / (time.monotonic() - t0), loss.item())


if __name__ == "__main__":
    torch.set_num_threads(1)
    cfg = PipeConfig()
    q = start_pipeline(cfg)
    t = threading.Thread(target=fit, args=(cfg, q), name="fit")
    t.start()
    t.join()
