"""Bid-landscape model: auction features -> P(win) and the clearing price, trained on replayed auction logs.

    replay thread (auction log -> per-auction bookkeeping and metrics -> batches) --(queue)--> trainer (main thread)

usage: python train.py [--metrics multiproc|inprocess] [--batch 512] [--steps N]
"""
import argparse
import queue
import signal
import threading
import time

import observability


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--metrics", choices=observability.MODES, default="multiproc")
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--steps", type=int, default=10_000_000)
    ap.add_argument("--lr", type=float, default=1e-3)
    return ap.parse_args()


ARGS = parse_args()
observability.setup(ARGS.metrics)     # before anything imports prometheus_client

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from auctions import EXCHANGES, FORMATS, N_FEATURES, AuctionLog, book  # noqa: E402
from torch import nn  # noqa: E402


class BidLandscape(nn.Module):
    def __init__(self, hidden=128):
        super().__init__()
        self.ex = nn.Embedding(len(EXCHANGES) * len(FORMATS), 8)
        self.body = nn.Sequential(nn.Linear(N_FEATURES + 8 + 1, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU())
        self.win = nn.Linear(hidden, 1)
        self.price = nn.Linear(hidden, 1)

    def forward(self, x, slot, logfloor):
        h = self.body(torch.cat([x, self.ex(slot), logfloor[:, None]], 1))
        return self.win(h).squeeze(1), self.price(h).squeeze(1)


def replay(q, halt, batch):
    log = AuctionLog()
    start = 0
    while not halt.is_set():
        idx = log.batch(start, batch)
        start += batch
        won, price = book(log, idx)
        item = (torch.from_numpy(log.x[idx]),
                torch.from_numpy(log.exchange[idx] * len(FORMATS) + log.format[idx]),
                torch.from_numpy(np.log(log.floor[idx]).astype(np.float32)),
                torch.tensor(won), torch.tensor(price).clamp_(min=1e-3).log_())
        while not halt.is_set():
            try:
                q.put(item, timeout=0.2)
                break
            except queue.Full:
                pass


def main():
    torch.set_num_threads(1)      # one core for the trainer, the other for the replay
    torch.manual_seed(0)
    halt = threading.Event()

    def on_signal(signum, frame):
        halt.set()
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    q = queue.Queue(maxsize=8)
    th = threading.Thread(target=replay, args=(q, halt, ARGS.batch), name="auction-replay", daemon=True)
    th.start()

    model = BidLandscape()
    opt = torch.optim.Adam(model.parameters(), lr=ARGS.lr, foreach=True)
    step, t0, s0 = 0, time.perf_counter(), 0
    try:
        while step < ARGS.steps:
            x, slot, logfloor, won, logprice = q.get()
            win_logit, price_hat = model(x, slot, logfloor)
            loss = F.binary_cross_entropy_with_logits(win_logit, won)
            loss = loss + (won * (price_hat - logprice) ** 2).sum() / won.sum().clamp(min=1.0)
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
        observability.cleanup()


if __name__ == "__main__":
    main()
