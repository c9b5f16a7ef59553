#!/usr/bin/env python
"""Trains a small transformer encoder on random token streams; a status port and a stats logger run beside."""
import argparse
import logging
import time

import torch
import torch.nn as nn

from svc.status import StatsLogger, StatusPort, StepStats

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")


class TinyEncoder(nn.Module):
    def __init__(self, vocab=512, dim=64, heads=4, layers=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        block = nn.TransformerEncoderLayer(dim, heads, dim_feedforward=4 * dim, batch_first=True)
        self.enc = nn.TransformerEncoder(block, layers)
        self.out = nn.Linear(dim, vocab)

    def forward(self, tokens):
        return self.out(self.enc(self.emb(tokens)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=64)
    args = ap.parse_args()
    torch.set_num_threads(1)
    stats = StepStats()
    port = StatusPort(stats)
    port.start()
    StatsLogger(stats).start()
    logging.getLogger("main").info("status on port %d", port.sock.getsockname()[1])
    model = TinyEncoder().to(args.device)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-4)
    step = 0
    while True:
        t = time.perf_counter()
        tokens = torch.randint(0, 512, (args.batch, args.seq), device=args.device)
        logits = model(tokens[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, 512), tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        stats.add(time.perf_counter() - t, loss.item())
        if step % 50 == 0:
            print(f"step {step} loss {loss.item():.3f}", flush=True)


if __name__ == "__main__":
    main()
