"""Product-catalog embeddings: title, brand and numeric features -> a product vector trained to predict the
category (and the conversion rate).

    decoder thread (catalog JSON lines -> blocks -> features -> batches) --(queue)--> trainer (main thread)

usage: python train.py [--layout per-target|merged] [--batch 256] [--steps N]
"""
import argparse
import queue
import signal
import threading
import time

import runfiles


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layout", choices=runfiles.LAYOUTS, default="per-target")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=10_000_000)
    ap.add_argument("--lr", type=float, default=2e-3)
    return ap.parse_args()


ARGS = parse_args()
runfiles.setup(ARGS.layout)       # stages the first-party targets and puts them on sys.path

import random  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from catalog import BLOCK, catalog_lines, decode_block, featurize  # noqa: E402
from catalog_schema import CATEGORIES  # noqa: E402
from torch import nn  # noqa: E402


class ProductEncoder(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.tok = nn.EmbeddingBag(4096, dim, mode="mean", padding_idx=0)
        self.brand = nn.Embedding(300, dim)
        self.dense = nn.Linear(4, dim)
        self.mix = nn.Sequential(nn.Linear(dim, 128), nn.GELU(), nn.Linear(128, dim))
        self.cat = nn.Linear(dim, len(CATEGORIES))
        self.cvr = nn.Linear(dim, 1)

    def forward(self, toks, brand, dense):
        v = self.mix(self.tok(toks) + self.brand(brand) + self.dense(dense))
        return self.cat(v), self.cvr(v).squeeze(1)


def decoder(q, halt, batch):
    lines = catalog_lines()
    rng = random.Random(1)
    while not halt.is_set():
        records = []
        while len(records) < batch:
            start = rng.randrange(0, len(lines) - BLOCK)
            records.extend(decode_block(lines[start:start + BLOCK]))
        toks, brand, cat, dense = featurize(records[:batch])
        item = (torch.from_numpy(toks), torch.from_numpy(brand), torch.from_numpy(cat), torch.from_numpy(dense))
        while not halt.is_set():
            try:
                q.put(item, timeout=0.2)
                break
            except queue.Full:
                pass


def main():
    torch.set_num_threads(1)      # one core for the trainer, the other for the decoder
    torch.manual_seed(0)
    halt = threading.Event()

    def on_signal(signum, frame):
        halt.set()
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    q = queue.Queue(maxsize=8)
    th = threading.Thread(target=decoder, args=(q, halt, ARGS.batch), name="catalog-decoder", daemon=True)
    th.start()

    model = ProductEncoder()
    opt = torch.optim.AdamW(model.parameters(), lr=ARGS.lr, foreach=True)
    step, t0, s0 = 0, time.perf_counter(), 0
    try:
        while step < ARGS.steps:
            toks, brand, cat, dense = q.get()
            logits, cvr = model(toks, brand, dense)
            loss = F.cross_entropy(logits, cat) + F.mse_loss(cvr, dense[:, 2] * 10.0)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step % 10 == 0:
                now = time.perf_counter()
                print(f"step {step} loss {loss.item():.4f} steps/s={(step - s0) / (now - t0):.1f}", flush=True)
                t0, s0 = now, step
    finally:
        halt.set()
        th.join(timeout=1)


if __name__ == "__main__":
    main()
