#!/usr/bin/env python3
# Instruction fine-tune, in-memory corpus. The corpus is loaded once and frozen out of the collector's reach
# (gc.freeze), with one full collection before training starts: the usual recipe for big long-lived heaps. A
# gc callback counts the collections for the dashboard.
import gc
import random
import time

import torch
import torch.nn.functional as F

VOCAB, WIDTH, CTX = 512, 64, 32
COLLECTIONS = [0]


def count_collections(phase, info):
    if phase == "stop":
        COLLECTIONS[0] += 1  # the dashboard shows how often the collector runs


def load_corpus(n=15_000):
    r = random.Random(0)
    return [{"id": i, "q": [r.randrange(VOCAB) for _ in range(12)], "a": [r.randrange(VOCAB) for _ in range(12)],
             "tags": {"origin": "synthetic"}} for i in range(n)]


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.e = torch.nn.Embedding(VOCAB, WIDTH)
        self.h = torch.nn.Linear(WIDTH, WIDTH)
        self.o = torch.nn.Linear(WIDTH, VOCAB)

    def forward(self, x):
        return self.o(torch.tanh(self.h(self.e(x))))


def encode(r):
    ids = (r["q"] + r["a"])[:CTX]
    return {"ids": ids + [0] * (CTX - len(ids)), "mask": [1] * len(ids) + [0] * (CTX - len(ids)),
            "pairs": [[i, i + 1] for i in range(0, len(ids), 2)], "tags": dict(r["tags"])}


def pad(rows):
    return torch.tensor([encode(r)["ids"] for r in rows])


if __name__ == "__main__":
    torch.set_num_threads(1)
    corpus = load_corpus()
    gc.collect()  # once, before training
    gc.freeze()   # the corpus lives for the whole run: keep it out of every later collection
    gc.callbacks.append(count_collections)
    net = Net()
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    r = random.Random(1)
    it, start = 0, time.time()
    while True:
        x = pad(r.sample(corpus, 16))
        loss = F.cross_entropy(net(x[:, :-1]).reshape(-1, VOCAB), x[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        it += 1
        if it % 50 == 0:
            print(f"[ft] it={it} rate={it / (time.time() - start):.1f}/s", flush=True)
