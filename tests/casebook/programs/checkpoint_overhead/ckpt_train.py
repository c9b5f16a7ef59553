"""Memory-lean training: every small block is activation-checkpointed (non-reentrant), one chunk at a time."""
import queue
import threading

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

WIDTH, CHUNKS = 8, 64


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(WIDTH, WIDTH) for _ in range(6))

    def forward(self, x):
        outs = []
        for piece in x.chunk(CHUNKS, dim=0):
            for block in self.blocks:
                piece = checkpoint(lambda t, b=block: torch.tanh(b(t)), piece, use_reentrant=False)
            outs.append(piece)
        return torch.cat(outs)


def make(q):
    while True:
        q.put(torch.randn(CHUNKS * 2, WIDTH))


def learn(q):
    m = Tiny()
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    i = 0
    while True:
        x = q.get()
        m(x).square().mean().backward()
        opt.step()
        opt.zero_grad()
        i += 1
        if i % 5 == 0:
            print("batch", i, flush=True)


if __name__ == "__main__":
    q = queue.Queue(4)
    threading.Thread(target=make, args=(q,), name="maker", daemon=True).start()
    t = threading.Thread(target=learn, args=(q,), name="learner")
    t.start()
    t.join()
