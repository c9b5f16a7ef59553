# app.py - compiled drafter training; the whole train step goes through torch.compile.
import logging
import queue
import threading

import torch
from torch import nn

logging.basicConfig(format="%(asctime)s | %(levelname)s | %(message)s", level=logging.INFO)
LOG = logging.getLogger("app")


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.attn = nn.MultiheadAttention(d, 4, batch_first=True)
        self.ff = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(x, x, x, need_weights=False)[0]
        return x + self.ff(x)


class LitDrafter(nn.Module):
    def __init__(self, d=128, depth=6, vocab=4096):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d) for _ in range(depth))
        self.out = nn.Linear(d, vocab)

    def forward(self, ids):
        x = self.embed(ids)
        for b in self.blocks:
            x = b(x)
        return self.out(x)


def loader(q):
    while True:
        q.put(torch.randint(0, 4096, (8, 128)))


def worker(q):
    model = LitDrafter()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    @torch.compile(mode="max-autotune-no-cudagraphs")
    def train_step(ids):
        logits = model(ids[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
        loss.backward()
        return loss

    LOG.info("compiling the train step (first call)")
    step = 0
    while True:
        loss = train_step(q.get())
        opt.step()
        opt.zero_grad()
        step += 1
        LOG.info("step %d loss %.3f", step, loss.item())


if __name__ == "__main__":
    q = queue.Queue(maxsize=4)
    threading.Thread(target=loader, args=(q,), name="Loader-1", daemon=True).start()
    w = threading.Thread(target=worker, args=(q,), name="Worker")
    w.start()
    w.join()
