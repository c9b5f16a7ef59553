#!/usr/bin/env python
# SimCLR-style pretraining of a small MLP encoder on synthetic "images" (flattened 16x16), two augmented views.
import logging
import queue
import threading
import time

import torch
import torch.nn as nn

from embedlib.encode import encode_batch, info_nce

logging.basicConfig(format="%(asctime)s [%(threadName)s] %(message)s", level=logging.INFO)
log = logging.getLogger("pretrain")


class Encoder(nn.Module):
    def __init__(self, d_in=256, width=384, d_out=128):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(d_in, width), nn.GELU(), nn.Linear(width, width), nn.GELU(),
                                  nn.Linear(width, d_out))

    def forward(self, x):
        return self.body(x)


class SimCLR(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder()
        self.projector = nn.Sequential(nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 64))

    def forward(self, v1, v2):
        h1, h2 = encode_batch(self.encoder, v1), encode_batch(self.encoder, v2)
        return self.projector(h1), self.projector(h2)


def augment(x):
    return x + 0.3 * torch.randn_like(x)


def view_maker(out_q, stop):
    g = torch.Generator().manual_seed(1)
    while not stop.is_set():
        base = torch.rand(48, 256, generator=g)
        out_q.put((augment(base), augment(base)))
        time.sleep(0.01)


def main():
    torch.set_num_threads(1)
    model = SimCLR()
    optim = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    views = queue.Queue(maxsize=4)
    stop = threading.Event()
    threading.Thread(target=view_maker, args=(views, stop), name="view-maker", daemon=True).start()
    n = 0
    while True:
        v1, v2 = views.get()
        z1, z2 = model(v1, v2)
        loss = info_nce(z1, z2)
        optim.zero_grad()
        loss.backward()
        optim.step()
        n += 1
        if n % 30 == 0:
            log.info("pretrain step %d nce %.4f", n, loss.item())


if __name__ == "__main__":
    main()
