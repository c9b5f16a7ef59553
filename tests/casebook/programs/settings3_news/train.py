#!/usr/bin/env python3
"""News-topic classifier (fastText-style) fed by an asyncio shard-fetcher process (CPU).

A fastText-style news-topic classifier fed by a separate worker process: an
asyncio "shard fetcher" (spawned with multiprocessing) keeps 8 simulated
object-store downloads in flight, reads each shard body chunk by chunk under a
per-read asyncio.wait_for timeout, parses/tokenises articles into hashed
uni+bi-gram ids and ships batches over a multiprocessing queue; a receiver
thread in the trainer process turns them into tensors and puts them on a
queue.Queue for the training thread (EmbeddingBag + MLP, SGD).  A one-off scan
worker at start-up computes the label prior.  Progress: `step N loss X` once a
second.

Hidden mechanism (planted): train.py exports PYTHONASYNCIODEBUG=1 "to surface
never-retrieved task exceptions in the fetcher", and the long-running fetcher
process inherits it when it is spawned, so its event loop runs in asyncio debug
mode: every call_soon/call_later handle and every Task records a creation
traceback (extract_stack), coroutine-origin tracking is on, and each callback
is timed.  The fetcher (which has a per-read wait_for, i.e. a Task + timer per
chunk) becomes about 2.5-3x slower and the trainer starves waiting on its queue.
The trainer process itself never runs asyncio, so its own settings look clean;
the fetcher's stacks look like ordinary asyncio/JSON parsing work.
Healthy twin: `--fetcher-debug scan-only` -- PYTHONASYNCIODEBUG=1 is still set
in the parent and the short-lived manifest-scan worker still runs in debug
mode; only the long-running fetcher is spawned without it.

Reports: python/cpython#76151 ("asyncio debug mode is very slow"),
python/cpython#76228 (asyncio debug mode switched on by -X dev),
python/cpython#4478 (review note on letting child processes inherit the
debug-mode environment variables).

Run:   python train.py                             (planted)
       python train.py --fetcher-debug scan-only   (healthy twin)
Measured on the 2-core AMD EPYC box, A/B/A/B/A/B runs of 25 s (SIGINT),
steps/s between first and last progress line, medians of 3:
planted 64.7 steps/s, twin 122.7 steps/s (47% slower).
"""
import argparse
import multiprocessing as mp
import multiprocessing.util
import os
import queue
import shutil
import signal
import sys
import tempfile
import threading
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import fetcher


class TopicNet(nn.Module):
    def __init__(self, dim=32, n_cls=len(fetcher.TOPICS)):
        super().__init__()
        self.emb = nn.EmbeddingBag(fetcher.N_BUCKETS, dim, mode="mean")
        self.mlp = nn.Sequential(nn.Linear(dim, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, n_cls))

    def forward(self, ids, offs):
        return self.mlp(self.emb(ids, offs))


def start_worker(ctx, target, args, debug_env):
    """Spawn a worker; its interpreter is configured from the environment we
    hand down (spawned children inherit os.environ at start())."""
    saved = os.environ.get("PYTHONASYNCIODEBUG")
    if debug_env:
        os.environ["PYTHONASYNCIODEBUG"] = "1"
    else:
        os.environ.pop("PYTHONASYNCIODEBUG", None)
    try:
        p = ctx.Process(target=target, args=args, daemon=True)
        p.start()
    finally:
        if saved is None:
            os.environ.pop("PYTHONASYNCIODEBUG", None)
        else:
            os.environ["PYTHONASYNCIODEBUG"] = saved
    return p


def receiver(mpq, q, stop):
    """Moves fetched batches from the worker process into the trainer's queue."""
    while not stop.is_set():
        try:
            ids, offs, labels = mpq.get(timeout=0.2)
        except queue.Empty:
            continue
        item = (torch.tensor(ids), torch.tensor(offs), torch.tensor(labels))
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                break
            except queue.Full:
                pass


def trainer(q, stop, args, prior):
    torch.manual_seed(args.seed)
    model = TopicNet()
    with torch.no_grad():
        model.mlp[-1].bias.copy_(torch.log(torch.tensor(prior, dtype=torch.float) + 1))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    step, ema, last = 0, None, time.time()
    while not stop.is_set():
        try:
            ids, offs, y = q.get(timeout=0.2)
        except queue.Empty:
            continue
        loss = F.cross_entropy(model(ids, offs), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        lv = loss.item()
        ema = lv if ema is None else 0.97 * ema + 0.03 * lv
        now = time.time()
        if now - last >= 1.0:
            print(f"step {step} loss {ema:.4f}", flush=True)
            last = now


def main():
    ap = argparse.ArgumentParser(description="news topic classifier")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--in-flight", type=int, default=8, help="concurrent shard downloads")
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--fetcher-debug", choices=("always", "scan-only"), default="always",
                    help="run the fetcher workers with asyncio debug (PYTHONASYNCIODEBUG) "
                         "always, or only for the one-off manifest scan")
    args = ap.parse_args()

    # Debugging aid for the fetcher workers: surfaces never-retrieved task
    # exceptions and un-awaited coroutines with their creation tracebacks.
    os.environ["PYTHONASYNCIODEBUG"] = "1"

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda s, f: stop.set())
    signal.signal(signal.SIGINT, lambda s, f: stop.set())

    ctx = mp.get_context("spawn")
    log_dir = tempfile.mkdtemp(prefix="newsfetch-")
    log_path = os.path.join(log_dir, "fetcher.log")

    # one-off: label prior from the first shards
    rq = ctx.Queue()
    scan = start_worker(ctx, fetcher.scan_manifest, (rq, f"news/{args.seed}", 24, log_path), debug_env=True)
    prior = rq.get()
    scan.join()

    mpq = ctx.Queue(maxsize=16)
    mstop = ctx.Event()
    worker = start_worker(ctx, fetcher.run_fetcher, (mpq, mstop, args.batch, args.in_flight, args.seed, log_path),
                          debug_env=(args.fetcher_debug == "always"))

    q = queue.Queue(maxsize=8)
    threads = [
        threading.Thread(target=receiver, args=(mpq, q, stop), name="batch-receiver", daemon=True),
        threading.Thread(target=trainer, args=(q, stop, args, prior), name="trainer", daemon=True),
    ]
    for t in threads:
        t.start()
    while not stop.is_set() and worker.is_alive():
        stop.wait(0.5)
    stop.set()
    mstop.set()
    for t in threads:
        t.join(timeout=0.8)
    worker.join(timeout=0.3)
    if worker.is_alive():
        worker.terminate()
        worker.join(timeout=0.3)
    shutil.rmtree(log_dir, ignore_errors=True)
    sys.stdout.flush()
    # Hard exit to skip the slow library teardown; run multiprocessing's exit
    # hooks first so the queues' named semaphores are released properly.
    mp.util._exit_function()
    os._exit(0)


if __name__ == "__main__":
    main()
