#!/usr/bin/env python
"""Trains a small MLP regressor with a background checkpointer and a metrics registry."""
import logging
import threading
import time

import torch
from torch import nn

from jobkit.checkpoint import BackgroundCheckpointer
from jobkit.metrics import MetricsRegistry

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
log = logging.getLogger("train_job")


def build_model():
    return nn.Sequential(nn.Linear(128, 512), nn.SiLU(), nn.Linear(512, 512), nn.SiLU(), nn.Linear(512, 1))


def train(model, opt, registry):
    step = 0
    w = torch.randn(128, 1)
    while True:
        x = torch.randn(64, 128)
        y = x @ w
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        registry.record("loss", loss.item(), step)
        registry.record("lr", opt.param_groups[0]["lr"], step)
        if step % 100 == 0:
            log.info("step %d loss %.4f", step, loss.item())


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = build_model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    registry = MetricsRegistry()
    ckpt = BackgroundCheckpointer(model, opt, registry, every_s=3.0)
    registry.subscribe(ckpt.on_metric)
    ckpt.start()
    worker = threading.Thread(target=train, args=(model, opt, registry), name="train-loop")
    worker.start()
    worker.join()


if __name__ == "__main__":
    main()
