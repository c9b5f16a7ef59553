"""Card-fraud classifier trained on a replayed transaction stream.

    main thread: stream -> split each batch by card shard -> featurizer pool (2 single-thread executors, each owning
                 one shard of the per-card history, so a shard's chunks run in order) -> (futures, a few batches
                 ahead) -> MLP training step

usage: python train.py [--trace-sample 1.0|0.001] [--batch 256] [--steps N]
"""
import argparse
import shutil
import signal
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import telemetry


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trace-sample", type=float, default=1.0)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--ahead", type=int, default=4)
    ap.add_argument("--steps", type=int, default=10_000_000)
    ap.add_argument("--lr", type=float, default=1e-3)
    return ap.parse_args()


ARGS = parse_args()
WORKDIR = tempfile.mkdtemp(prefix="fraud-run-")
telemetry.setup(ARGS.trace_sample, WORKDIR)       # before the feature code takes its tracer

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
from transactions import N_FEATURES, CardState, Stream, featurize_chunk  # noqa: E402

N_SHARDS = 2


class FraudNet(nn.Module):
    def __init__(self, hidden=256):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(N_FEATURES, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, x):
        return self.net(x).squeeze(1)


def submit_batch(pools, stream, shards):
    txns = stream.next_batch(ARGS.batch)
    parts = [[] for _ in range(N_SHARDS)]
    for t in txns:
        parts[t["card"] % N_SHARDS].append(t)
    return [pools[k].submit(featurize_chunk, shards[k], parts[k]) for k in range(N_SHARDS)]


def collect(futures):
    feats, labels = [], []
    for fut in futures:
        f, y = fut.result()
        feats.extend(f)
        labels.extend(y)
    return torch.tensor(feats), torch.tensor(labels)


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)

    def on_signal(signum, frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    stream = Stream()
    shards = [CardState(stream, k, N_SHARDS) for k in range(N_SHARDS)]
    pools = [ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"featurizer-{k}") for k in range(N_SHARDS)]
    model = FraudNet()
    opt = torch.optim.Adam(model.parameters(), lr=ARGS.lr, foreach=True)
    pos_weight = torch.tensor(8.0)
    pending = [submit_batch(pools, stream, shards) for _ in range(ARGS.ahead)]
    step, t0, s0 = 0, time.perf_counter(), 0
    try:
        while step < ARGS.steps:
            x, y = collect(pending.pop(0))
            pending.append(submit_batch(pools, stream, shards))
            x = (x - x.mean(0)) / (x.std(0) + 1e-3)
            loss = F.binary_cross_entropy_with_logits(model(x), y, pos_weight=pos_weight)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step % 5 == 0:
                now = time.perf_counter()
                print(f"step {step} loss {loss.item():.4f} steps/s={(step - s0) / (now - t0):.1f}", flush=True)
                t0, s0 = now, step
    finally:
        for futs in pending:
            for fut in futs:
                fut.cancel()
        for pool in pools:
            pool.shutdown(wait=True, cancel_futures=True)
        telemetry.shutdown()
        shutil.rmtree(WORKDIR, ignore_errors=True)


if __name__ == "__main__":
    main()
