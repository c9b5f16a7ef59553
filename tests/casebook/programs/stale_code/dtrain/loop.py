import queue
import threading
import time

import torch
from torch import nn

from dtrain.losses import chunked_ce, l2

VOCAB, DIM = 2048, 128


def make_batches(q, rng_seed):
    g = torch.Generator().manual_seed(rng_seed)
    emb = nn.Embedding(VOCAB, DIM)
    while True:
        ids = torch.randint(0, VOCAB, (4, 64), generator=g)
        with torch.no_grad():
            q.put((emb(ids), ids))


def train(q, log_every=25):
    body = nn.Sequential(nn.Linear(DIM, DIM), nn.GELU(), nn.Linear(DIM, DIM))
    head = nn.Linear(DIM, VOCAB)
    opt = torch.optim.SGD(list(body.parameters()) + list(head.parameters()), lr=0.05)
    step, t0 = 0, time.time()
    while True:
        hidden, ids = q.get()
        loss = chunked_ce(body(hidden), head, ids) + 1e-5 * l2(head.parameters())
        loss.backward()
        opt.step()
        opt.zero_grad()
        step += 1
        if step % log_every == 0:
            print(f"step {step:5d}  loss {loss.item():.3f}  {step / (time.time() - t0):.1f} it/s", flush=True)


def run():
    q = queue.Queue(maxsize=4)
    threading.Thread(target=make_batches, args=(q, 1), name="data", daemon=True).start()
    trainer = threading.Thread(target=train, args=(q,), name="train", daemon=True)
    trainer.start()
    trainer.join()
