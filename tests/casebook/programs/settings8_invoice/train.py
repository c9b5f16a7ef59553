"""Late-payment model for B2B invoices: how many days past terms will an invoice be paid?

    featurizer thread (exact decimal arithmetic) --(queue)--> trainer (main thread)

usage: python train.py [--money-profile audit|standard] [--batch 64]
"""
import argparse
import queue
import signal
import threading
import time

import torch
from torch import nn

import money
from invoices import LINE_FEATURES, MAX_LINES, stream


class LateNet(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.line = nn.Sequential(nn.Linear(LINE_FEATURES, dim), nn.ReLU(), nn.Linear(dim, dim), nn.ReLU())
        self.head = nn.Sequential(nn.Linear(dim + 3, dim), nn.ReLU(), nn.Linear(dim, 1))

    def forward(self, lines, inv):
        mask = lines[..., -1:]                                  # last line feature marks real lines
        pooled = (self.line(lines) * mask).sum(1) / mask.sum(1).clamp(min=1)
        return self.head(torch.cat([pooled, inv], dim=1)).squeeze(1)


def featurizer(q, halt, batch):
    src = stream(seed=21)
    while not halt.is_set():
        lines, inv, late = zip(*(next(src) for _ in range(batch)))
        item = (torch.tensor(lines), torch.tensor(inv), torch.tensor(late))
        while not halt.is_set():
            try:
                q.put(item, timeout=0.2)
                break
            except queue.Full:
                pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--money-profile", choices=sorted(money.PROFILES), default="audit")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    args = ap.parse_args()

    money.configure(args.money_profile)
    torch.manual_seed(0)
    halt = threading.Event()

    def on_signal(signum, frame):
        halt.set()
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    q = queue.Queue(maxsize=8)
    th = threading.Thread(target=featurizer, args=(q, halt, args.batch), name="featurizer", daemon=True)
    th.start()

    model = LateNet()
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    step, t0, s0 = 0, time.perf_counter(), 0
    try:
        while True:
            lines, inv, late = q.get()
            loss = nn.functional.huber_loss(model(lines, inv), late)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step % 25 == 0:
                now = time.perf_counter()
                print(f"step {step} loss {loss.item():.4f} steps/s={(step - s0) / (now - t0):.1f}", flush=True)
                t0, s0 = now, step
    finally:
        halt.set()
        th.join(timeout=1)


if __name__ == "__main__":
    main()
