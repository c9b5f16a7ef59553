"""Click-through-rate model on the impression log (hashed sparse features + dense).

    log reader thread (parse adlog.Impression records, hash features) --(queue)--> trainer (main thread)

usage: python train.py [--proto-runtime portable|native] [--batch 256] [--steps N]
"""
import argparse
import queue
import signal
import threading
import time
import zlib

import torch
import torch.nn.functional as F
from torch import nn

import proto_runtime

BUCKETS = 1 << 18
N_DENSE = 13 + 2                      # logged dense features + query/title overlap and title length


class CTRModel(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.sparse = nn.EmbeddingBag(BUCKETS, dim, mode="sum")
        self.dense = nn.Sequential(nn.Linear(N_DENSE, dim), nn.ReLU())
        self.top = nn.Sequential(nn.Linear(2 * dim, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, ids, offsets, weights, dense):
        s = self.sparse(ids, offsets, per_sample_weights=weights)
        return self.top(torch.cat([s, self.dense(dense)], dim=1)).squeeze(1)


def bucket(key):
    return zlib.crc32(key.encode()) & (BUCKETS - 1)


def text_features(prefix, text):
    toks = text.lower().split()
    keys = [f"{prefix}:{t}" for t in toks] + [f"{prefix}:{a}_{b}" for a, b in zip(toks, toks[1:])]
    return toks, [bucket(k) for k in keys]


def log_reader(shards, q, halt, batch):
    from adlog import records
    from impression_pb2 import Impression
    while not halt.is_set():
        for shard in shards:
            ids, weights, offsets, dense, labels = [], [], [], [], []
            for blob in records(shard):
                imp = Impression.FromString(blob)
                offsets.append(len(ids))
                ctx = imp.context
                for key in (f"ad={imp.ad_id}", f"cmp={imp.campaign_id}", f"dev={ctx.device}", f"os={ctx.os}",
                            f"geo={ctx.geo}", f"hour={ctx.hour}"):
                    ids.append(bucket(key))
                    weights.append(1.0)
                for f in imp.features:
                    ids.append(bucket(f"{f.slot}={f.value}"))
                    weights.append(f.weight)
                for h in imp.history:
                    ids.append(bucket(f"hist={h}"))
                    weights.append(0.5)
                q_toks, q_ids = text_features("q", imp.query)
                t_toks, t_ids = text_features("t", imp.ad_title)
                for a in q_toks:                      # query x title word crosses
                    for b in t_toks:
                        q_ids.append(bucket(f"x:{a}|{b}"))
                ids.extend(q_ids)
                ids.extend(t_ids)
                weights.extend([1.0] * (len(q_ids) + len(t_ids)))
                overlap = len(set(q_toks) & set(t_toks))
                dense.append(list(imp.dense) + [overlap / max(len(q_toks), 1), len(t_toks) / 12.0])
                labels.append(1.0 if imp.clicked else 0.0)
                if len(labels) == batch:
                    item = (torch.tensor(ids), torch.tensor(offsets), torch.tensor(weights),
                            torch.tensor(dense), torch.tensor(labels))
                    ids, weights, offsets, dense, labels = [], [], [], [], []
                    while not halt.is_set():
                        try:
                            q.put(item, timeout=0.2)
                            break
                        except queue.Full:
                            pass
                    if halt.is_set():
                        return


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--proto-runtime", choices=sorted(proto_runtime.IMPLEMENTATIONS), default="portable")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=10_000_000)
    ap.add_argument("--lr", type=float, default=1e-3)
    args = ap.parse_args()

    proto_runtime.apply(args.proto_runtime)
    from adlog import build_shards
    torch.set_num_threads(1)      # one core for the trainer, the other for the log reader
    torch.manual_seed(0)
    shards = build_shards()
    halt = threading.Event()

    def on_signal(signum, frame):
        halt.set()
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    q = queue.Queue(maxsize=8)
    th = threading.Thread(target=log_reader, args=(shards, q, halt, args.batch), name="log-reader", daemon=True)
    th.start()

    model = CTRModel()
    opt = torch.optim.Adagrad(model.parameters(), lr=args.lr * 10)
    step, t0, s0 = 0, time.perf_counter(), 0
    try:
        while step < args.steps:
            ids, offsets, weights, dense, labels = q.get()
            logits = model(ids, offsets, weights, dense)
            loss = F.binary_cross_entropy_with_logits(logits, labels)
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
