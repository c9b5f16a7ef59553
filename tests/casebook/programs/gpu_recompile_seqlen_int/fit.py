"""Varlen LM fine-tuning: a collator thread packs batches, the trainer runs a compiled forward+loss that only
looks at the first `max_len` positions (the longest document of the batch).

Modelled on Dao-AILab/quack#150 (varlen training: "the max seqlen in the flattened batch is always different,
this causes a recompilation with torch.compile(model, dynamic=False)": guard failures on the Python int
`max_length_k == 496`) and allenai/open-instruct#1445 (396 recompilations without fixed-length padding): the
compiled step takes the batch's max_len as a Python int, dynamic=False specialises on each value, and the
recompile limit was raised to silence the limit warning, so nearly every step compiles a new graph.

  python fit.py                # max_len passed as is (as run)
  python fit.py --bucket 512   # max_len rounded up to a multiple of 512; the buckets are compiled at start-up
"""
from __future__ import annotations

import argparse
import logging
import queue
import random
import threading
import time

import torch
import torch._dynamo
import torch.nn.functional as F
from torch import nn

from collate import collate

log = logging.getLogger("fit")


class LM(nn.Module):
    def __init__(self, vocab: int, width: int, depth: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, width)
        self.mlps = nn.ModuleList(nn.Sequential(nn.LayerNorm(width), nn.Linear(width, 3 * width), nn.GELU(),
                                                nn.Linear(3 * width, width)) for _ in range(depth))
        self.out = nn.Linear(width, vocab, bias=False)

    def forward(self, ids: torch.Tensor, max_len: int) -> torch.Tensor:
        h = self.emb(ids[:, :max_len])
        for mlp in self.mlps:
            h = h + mlp(h)
        logits = self.out(h[:, :-1]).float()
        return F.cross_entropy(logits.flatten(0, 1), ids[:, 1:max_len].flatten(), ignore_index=0)


def collator(out: queue.Queue, args: argparse.Namespace, device: torch.device) -> None:
    rng = random.Random(0)
    while True:
        out.put(collate(rng, args.batch, args.max_tokens, args.vocab, device, args.bucket))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--bucket", type=int, default=0)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s [%(threadName)s] %(message)s")
    device = torch.device(args.device)
    gpu = device.type == "cuda"
    args.vocab, args.width, args.depth, args.batch, args.max_tokens = (
        (32_000, 1024, 2, 16, 1024) if gpu else (1_000, 64, 1, 2, 128))
    torch._dynamo.config.cache_size_limit = 1024  # the "recompile limit reached" warning, silenced
    model = LM(args.vocab, args.width, args.depth).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    step_fn = torch.compile(model, dynamic=False)
    batches: queue.Queue = queue.Queue(maxsize=8)

    def train() -> None:
        if args.bucket:
            for max_len in range(args.bucket, args.max_tokens + 1, args.bucket):
                log.info("warming up the compiled step for max_len=%d", max_len)
                ids = torch.randint(1, args.vocab, (args.batch, args.max_tokens), device=device)
                with torch.autocast(device.type, dtype=torch.bfloat16, enabled=gpu):
                    loss = step_fn(ids, max_len)
                loss.backward()
                opt.zero_grad(set_to_none=True)
        threading.Thread(target=collator, args=(batches, args, device), name="collator", daemon=True).start()
        step, t0 = 0, time.time()
        while True:
            ids, max_len = batches.get()
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=gpu):
                loss = step_fn(ids, max_len)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            if step <= 3 or step % 50 == 0:
                log.info("step %d max_len %d loss %.3f (%.2f s/step)", step, max_len, loss.item(),
                         (time.time() - t0) / step)

    worker = threading.Thread(target=train, name="trainer")
    worker.start()
    worker.join()


if __name__ == "__main__":
    main()
