#!/usr/bin/env python
"""Pretrains a bag-of-tokens language classifier; six loader threads tokenize documents in parallel."""
import queue
import random
import threading
import time

import torch
import torch.nn as nn

import tokcache

N_LOADERS = 6
DOCS_PER_BATCH = 8
VOCAB = 4096


def random_doc(rng):
    letters = "etaoinshrdlcumwfgypbvkjxqz"
    return " ".join("".join(rng.choice(letters) for _ in range(rng.randint(12, 24))) for _ in range(160))


def loader(idx, out):
    rng = random.Random(idx)
    while True:
        docs = [random_doc(rng) for _ in range(DOCS_PER_BATCH)]
        batch = [tokcache.encode_cached(d)[:256] for d in docs]
        ids = torch.zeros(len(batch), 256, dtype=torch.long)
        for row, toks in enumerate(batch):
            ids[row, :len(toks)] = torch.tensor(toks)
        out.put(ids)


class BagModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.EmbeddingBag(VOCAB, 64, mode="mean")
        self.head = nn.Linear(64, 4)

    def forward(self, ids):
        return self.head(self.emb(ids))


def main():
    torch.set_num_threads(1)
    tokcache.load_merges()
    batches = queue.Queue(maxsize=32)
    for i in range(N_LOADERS):
        threading.Thread(target=loader, args=(i, batches), name=f"tok-loader-{i}", daemon=True).start()
    model = BagModel()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    n, t0 = 0, time.time()
    while True:
        ids = batches.get()
        loss = nn.functional.cross_entropy(model(ids), torch.randint(0, 4, (ids.shape[0],)))
        opt.zero_grad()
        loss.backward()
        opt.step()
        n += 1
        if n % 5 == 0:
            print(f"batch {n}: {n / (time.time() - t0):.2f} batches/s, loss {loss.item():.3f}", flush=True)


if __name__ == "__main__":
    main()
