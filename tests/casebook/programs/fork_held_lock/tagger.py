#!/usr/bin/env python
# Reproduces the mechanism of pytorch/pytorch#24927 (DataLoader stuck: "fork does inherit lock states", fixed for
# torch's own SharedCache lock in pytorch/pytorch#25158): a worker process forked while another thread of the
# parent holds a lock inherits that lock held, with no thread left to release it.
"""Trains a text-tag classifier. After each epoch the label map is refreshed in the background."""
import logging
import time

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

import labelmap

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(processName)s %(name)s: %(message)s")
log = logging.getLogger("tagger")


class TaggedSnippets(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.randn(48, generator=g), labelmap.lookup(f"class_{i % 24}")


def validate(model):
    with torch.no_grad():
        return model(torch.randn(256, 48)).argmax(-1).float().mean().item()


def main():
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(48, 128), nn.Tanh(), nn.Linear(128, 24))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = DataLoader(TaggedSnippets(640), batch_size=32, num_workers=2, multiprocessing_context="fork")
    for epoch in range(1, 1000):
        t0 = time.time()
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        log.info("epoch %d done in %.2fs, loss %.3f", epoch, time.time() - t0, loss.item())
        labelmap.refresh_async()
        log.info("epoch %d validation: %.3f", epoch, validate(model))


if __name__ == "__main__":
    main()
