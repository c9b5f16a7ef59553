"""Support-ticket intent classifier: hashed n-grams -> EmbeddingBag -> MLP, 24 intents.

    featurizer thread (ticket JSON -> augmentation -> hashed n-gram ids and weights) --(queue)--> trainer (main thread)

usage: python train.py [--rng-policy os-entropy|seeded] [--batch 256] [--steps N]
"""
import argparse
import queue
import signal
import threading
import time

import rng_policy
import torch
import torch.nn.functional as F
from tickets import BUCKETS, INTENTS, featurize, record_stream
from torch import nn


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rng-policy", choices=rng_policy.POLICIES, default="os-entropy")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=10_000_000)
    ap.add_argument("--lr", type=float, default=2e-3)
    return ap.parse_args()


class IntentNet(nn.Module):
    def __init__(self, dim=32, hidden=64):
        super().__init__()
        self.bag = nn.EmbeddingBag(BUCKETS, dim, mode="sum")
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, len(INTENTS)))

    def forward(self, ids, offsets, weights):
        return self.mlp(self.bag(ids, offsets, per_sample_weights=weights))


def featurizer(q, halt, batch):
    stream = record_stream()
    while not halt.is_set():
        labels, flat_ids, flat_w, offsets = [], [], [], []
        for _ in range(batch):
            label, ids, w = featurize(next(stream))
            labels.append(label)
            offsets.append(len(flat_ids))
            flat_ids.extend(ids)
            flat_w.extend(w)
        item = (torch.tensor(flat_ids), torch.tensor(offsets), torch.tensor(flat_w), torch.tensor(labels))
        while not halt.is_set():
            try:
                q.put(item, timeout=0.2)
                break
            except queue.Full:
                pass


def main():
    global ARGS
    ARGS = parse_args()
    rng_policy.apply(ARGS.rng_policy)
    torch.set_num_threads(1)      # one core for the trainer, the other for the featurizer
    torch.manual_seed(0)
    halt = threading.Event()

    def on_signal(signum, frame):
        halt.set()
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    q = queue.Queue(maxsize=8)
    th = threading.Thread(target=featurizer, args=(q, halt, ARGS.batch), name="featurizer", daemon=True)
    th.start()

    model = IntentNet()
    opt = torch.optim.AdamW(model.parameters(), lr=ARGS.lr, weight_decay=0.01, foreach=True)
    step, t0, s0 = 0, time.perf_counter(), 0
    try:
        while step < ARGS.steps:
            ids, offsets, w, y = q.get()
            loss = F.cross_entropy(model(ids, offsets, w), y)
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
