"""Skip prediction for a music streaming service: will the listener skip this track in the first 30 seconds?

    session worker   a child process (torch.multiprocessing.Process) samples listening sessions (synthetic) and
                     puts each batch on a torch.multiprocessing queue: a dict of 89 tensors, an ids, an offsets
                     and a weights tensor per sparse feature, one column per dense feature and the labels
    fetch thread     takes batches off that queue (unpickling them) into a local queue
    main thread      trains an embedding-bag model (one weighted EmbeddingBag per sparse feature, sparse
                     gradients and SparseAdam for the tables, an MLP on top with Adam)

The tensor-sharing policy (ipc_policy.apply, at start-up) is --ipc-profile.

usage: python train.py [--ipc-profile descriptors|named] [--batch 128] [--steps N]

With the 'descriptors' profile every tensor of every batch gets its own shared-memory segment whose file
descriptor the consumer fetches from the worker's resource sharer over a Unix socket; public reports of the
cost of the file_descriptor strategy with many tensors: pytorch/pytorch#39443, pytorch/pytorch#973,
pytorch/pytorch#11201, pytorch/pytorch#65198, datamol-io/graphium#282.
"""
import argparse
import os
import queue
import signal
import threading
import time

import ipc_policy


def cli():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ipc-profile", choices=sorted(ipc_policy.STRATEGY), default="descriptors")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=2 ** 62)
    ap.add_argument("--lr", type=float, default=1e-3)
    return ap.parse_args()


ARGS = cli()
STRATEGY = ipc_policy.apply(ARGS.ipc_profile)

import torch  # noqa: E402
import torch.multiprocessing as tmp  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import sessions  # noqa: E402


def session_worker(out, batch, seed):
    """Child process entry point."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)          # the trainer decides when we stop
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    torch.set_num_threads(1)
    sampler = sessions.SessionSampler(seed)
    while True:
        out.put(sampler.batch(batch))


class Fetcher(threading.Thread):
    def __init__(self, inbox, out, stop):
        super().__init__(name="fetch", daemon=True)
        self.inbox, self.out, self.stop = inbox, out, stop
        self.error = None

    def run(self):
        try:
            while not self.stop.is_set():
                try:
                    item = self.inbox.get(timeout=0.5)
                except queue.Empty:
                    continue
                while not self.stop.is_set():
                    try:
                        self.out.put(item, timeout=0.5)
                        break
                    except queue.Full:
                        pass
        except Exception as exc:        # noqa: BLE001 - reported by the main thread
            self.error = exc


class SkipModel(nn.Module):
    def __init__(self, dim=16, hidden=256):
        super().__init__()
        self.bags = nn.ModuleDict({name: nn.EmbeddingBag(vocab, dim, mode="sum", sparse=True)
                                   for name, vocab in sessions.SPARSE.items()})
        n_in = dim * len(sessions.SPARSE) + len(sessions.DENSE)
        self.mlp = nn.Sequential(nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, 1))

    def forward(self, b):
        parts = [bag(b[f"{name}.ids"], b[f"{name}.offsets"], per_sample_weights=b[f"{name}.weights"])
                 for name, bag in self.bags.items()]
        dense = torch.stack([b[f"dense.{name}"] for name in sessions.DENSE], 1)
        return self.mlp(torch.cat(parts + [dense], 1)).squeeze(1)


class Interrupted(BaseException):
    pass


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)

    def on_signal(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise Interrupted()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    stop = threading.Event()
    worker = None
    shared = tmp.Queue(maxsize=6)
    try:
        worker = tmp.Process(target=session_worker, args=(shared, ARGS.batch, 11), name="session-worker",
                             daemon=True)
        worker.start()
        local = queue.Queue(maxsize=4)
        fetcher = Fetcher(shared, local, stop)
        fetcher.start()
        print(f"sharing strategy {STRATEGY}, worker pid {worker.pid}", flush=True)

        model = SkipModel()
        opts = [torch.optim.SparseAdam(list(model.bags.parameters()), lr=ARGS.lr),
                torch.optim.Adam(model.mlp.parameters(), lr=ARGS.lr)]
        step, tick, tick_step = 0, time.monotonic(), 0
        while step < ARGS.steps:
            try:
                b = local.get(timeout=2.0)
            except queue.Empty:
                if fetcher.error is not None or not worker.is_alive():
                    raise RuntimeError(f"session feed stopped: {fetcher.error!r}, worker exit {worker.exitcode}")
                continue
            loss = F.binary_cross_entropy_with_logits(model(b), b["skipped"])
            for opt in opts:
                opt.zero_grad(set_to_none=True)
            loss.backward()
            for opt in opts:
                opt.step()
            step += 1
            if step % 25 == 0:
                now = time.monotonic()
                print(f"step {step} loss {loss.item():.4f} rate {(step - tick_step) / (now - tick):.1f}/s",
                      flush=True)
                tick, tick_step = now, step
    except Interrupted:
        print("interrupted, stopping the session worker", flush=True)
    finally:
        stop.set()
        if worker is not None:
            if worker.is_alive():
                worker.terminate()
            worker.join(timeout=5)
            if worker.is_alive():
                worker.kill()
                worker.join()
        shared.cancel_join_thread()
        shared.close()


if __name__ == "__main__":
    main()
