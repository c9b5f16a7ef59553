"""Topic classifier trainer (CPU) fed from compressed, checksummed token shards.

Pre-tokenized corpus shards are kept zlib-compressed in memory together with
their sha256 digests (they normally come from object storage).  A pool of two
decode threads takes shards round-robin, inflates them, verifies the digest
and cuts a batch of token windows, then puts it on a queue.Queue; the training
thread runs an EmbeddingBag + MLP classifier with AdamW.  Every 10 s the
trainer writes a checkpoint and hands it to a separate evaluator process
(evaluator.py, which inherits the environment) that scores it on a held-out
set and then waits for the next one.  Progress is printed about once a second
as ``step N loss X``.

OpenMP tuning: the launcher applies the usual "keep the OpenMP worker team hot"
recipe, OMP_WAIT_POLICY=ACTIVE (plus KMP_BLOCKTIME for Intel OpenMP builds).
With libgomp that makes the OpenMP workers busy-spin whenever their master is
not inside a parallel region: the trainer's worker spins while it waits for
the next batch, and the evaluator's worker keeps spinning between evaluations
while the evaluator process itself is idle - so they take the two cores away
from the decode threads and the trainer.  See pytorch/pytorch#80777 (idle OpenMP workers burning CPU) and
JustVugg/colibri#341 / JustVugg/colibri#349 (OMP_WAIT_POLICY=active keeps the
team spinning forever between regions; fixed by switching to passive).

    python train.py                  # OMP_WAIT_POLICY=ACTIVE
    python train.py --omp-passive    # OMP_WAIT_POLICY=PASSIVE

Measured on the 2-core CI box (3 alternating 30 s runs each, medians):
    python train.py               : 7.98 steps/s
    python train.py --omp-passive : 14.32 steps/s  (44% fewer steps/s without the flag)
"""
import os
import sys

# libgomp reads these once, when torch loads it.
os.environ["OMP_WAIT_POLICY"] = "PASSIVE" if "--omp-passive" in sys.argv[1:] else "ACTIVE"
os.environ.setdefault("KMP_BLOCKTIME", "200")

import argparse  # noqa: E402
import ctypes  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import hashlib  # noqa: E402
import itertools  # noqa: E402
import queue  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import zlib  # noqa: E402

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

VOCAB = 32000
N_TOPICS = 16
BATCH = 64
WINDOW = 256
SHARD_TOKENS = 8_000_000
N_SHARDS = 4


def build_shards():
    """Stand-in for downloading the pre-tokenized shards."""
    shards = []
    g = torch.Generator().manual_seed(0)
    for _ in range(N_SHARDS):
        u = torch.rand(SHARD_TOKENS, generator=g)
        ids = (-500.0 * torch.log1p(-u)).clamp(max=VOCAB - 1).to(torch.int16)
        raw = ctypes.string_at(ids.data_ptr(), ids.numel() * ids.element_size())
        shards.append((zlib.compress(raw, 6), hashlib.sha256(raw).hexdigest()))
    return shards


def decode_worker(shards, order, order_lock, q, stop, seed):
    g = torch.Generator().manual_seed(seed)
    while not stop.is_set():
        with order_lock:
            idx = next(order)
        blob, digest = shards[idx]
        raw = zlib.decompress(blob)
        if hashlib.sha256(raw).hexdigest() != digest:
            raise RuntimeError(f"shard {idx} corrupt")
        starts = torch.randint(0, SHARD_TOKENS - WINDOW, (BATCH,), generator=g).tolist()
        rows = bytearray(b"".join(raw[2 * s:2 * (s + WINDOW)] for s in starts))
        x = torch.frombuffer(rows, dtype=torch.int16).view(BATCH, WINDOW).long()
        y = (x[:, :8].sum(dim=1) % N_TOPICS)
        del raw
        while not stop.is_set():
            try:
                q.put((x, y), timeout=0.5)
                break
            except queue.Full:
                pass


class BagClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.EmbeddingBag(VOCAB, 128, mode="mean")
        self.mlp = nn.Sequential(nn.Linear(128, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                                 nn.Linear(512, N_TOPICS))

    def forward(self, ids):
        return self.mlp(self.emb(ids))


def train_loop(q, stop, ckpt_dir, evaluator):
    torch.manual_seed(0)
    model = BagClassifier()
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3)
    step = 0
    last = last_ckpt = time.time()
    while not stop.is_set():
        x, y = q.get()
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        now = time.time()
        if now - last >= 1.0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
            last = now
        if now - last_ckpt >= 10.0:
            path = os.path.join(ckpt_dir, f"ckpt-{step}.pt")
            torch.save(model.state_dict(), path + ".tmp")
            os.replace(path + ".tmp", path)
            evaluator.stdin.write(f"{step} {path}\n".encode())
            evaluator.stdin.flush()
            last_ckpt = now


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--omp-passive", action="store_true", help="OMP_WAIT_POLICY=PASSIVE")
    ap.parse_args()

    def on_term(signum, frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_term)
    ckpt_dir = tempfile.mkdtemp(prefix="topiccls-")
    here = os.path.dirname(os.path.abspath(__file__))
    evaluator = subprocess.Popen([sys.executable, os.path.join(here, "evaluator.py"), ckpt_dir],
                                 stdin=subprocess.PIPE, cwd=here)
    stop = threading.Event()
    try:
        shards = build_shards()
        print(f"{len(shards)} shards ready", flush=True)
        # first checkpoint = untrained baseline
        base = os.path.join(ckpt_dir, "ckpt-0.pt")
        torch.manual_seed(0)
        torch.save(BagClassifier().state_dict(), base)
        evaluator.stdin.write(f"0 {base}\n".encode())
        evaluator.stdin.flush()
        q = queue.Queue(maxsize=8)
        order = itertools.cycle(range(len(shards)))
        order_lock = threading.Lock()
        workers = [threading.Thread(target=decode_worker, args=(shards, order, order_lock, q, stop, 100 + i),
                                    name=f"shard-decoder-{i}", daemon=True) for i in range(2)]
        trainer = threading.Thread(target=train_loop, args=(q, stop, ckpt_dir, evaluator),
                                   name="trainer", daemon=True)
        for w in workers:
            w.start()
        trainer.start()
        while trainer.is_alive():
            trainer.join(1.0)
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        try:
            evaluator.stdin.close()
        except OSError:
            pass
        evaluator.terminate()
        try:
            evaluator.wait(5)
        except subprocess.TimeoutExpired:
            evaluator.kill()
        shutil.rmtree(ckpt_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
