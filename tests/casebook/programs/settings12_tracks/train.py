"""Self-supervised track embeddings for catalogue search (SimCLR-style NT-Xent on two crops of each track).

    trainer (main process): synthesises a batch of log-mel crops, trains the encoder, looks up each track's nearest
                            neighbours in a memory bank of recent embeddings, and hands the step's export to
    exporter (child process, multiprocessing): writes the embedding shard and its gzip'd neighbour list

The export settings (shard retention, gzip options) come from a TOML file, --export-config.

usage: python train.py [--export-config configs/export_archive.toml] [--batch 64] [--steps N]
"""
import argparse
import multiprocessing as mp
import os
import queue
import shutil
import signal
import tempfile
import time
import tomllib

import torch
import torch.nn.functional as F

import audio
import exporter
from model import TrackEncoder, nt_xent

HERE = os.path.dirname(os.path.abspath(__file__))


def cli():
    ap = argparse.ArgumentParser()
    ap.add_argument("--export-config", default=os.path.join(HERE, "configs", "export_archive.toml"))
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--neighbours", type=int, default=128)
    ap.add_argument("--bank", type=int, default=8192)
    ap.add_argument("--steps", type=int, default=2 ** 62)
    ap.add_argument("--lr", type=float, default=3e-4)
    return ap.parse_args()


class Bank:
    """FIFO memory bank of recent (normalised) embeddings and their track ids."""

    def __init__(self, size, dim):
        self.z = F.normalize(torch.randn(size, dim), dim=1)
        self.ids = torch.randint(0, audio.N_TRACKS, (size,))
        self.ptr = 0

    def neighbours(self, z, k):
        scores, idx = (z @ self.z.t()).topk(k, dim=1)
        return self.ids[idx], scores

    def push(self, z, ids):
        n = z.shape[0]
        sl = torch.arange(self.ptr, self.ptr + n) % self.z.shape[0]
        self.z[sl] = z
        self.ids[sl] = ids
        self.ptr = (self.ptr + n) % self.z.shape[0]


class Interrupted(BaseException):
    pass


def main():
    args = cli()
    if not os.path.isabs(args.export_config) and not os.path.exists(args.export_config):
        args.export_config = os.path.join(HERE, args.export_config)      # relative to the program's folder
    with open(args.export_config, "rb") as fh:
        cfg = tomllib.load(fh)
    torch.set_num_threads(1)
    torch.manual_seed(3)

    def on_term(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)        # one shutdown at a time
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise Interrupted()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)

    outdir = child = None
    inbox = mp.Queue(maxsize=2)
    try:
        outdir = tempfile.mkdtemp(prefix="track-emb-export-")
        child = mp.Process(target=exporter.run, args=(inbox, outdir, cfg), name="emb-exporter", daemon=True)
        child.start()

        cat = audio.Catalogue()
        enc = TrackEncoder(audio.N_MELS, width=48)
        opt = torch.optim.AdamW(enc.parameters(), lr=args.lr, weight_decay=1e-4, foreach=True)
        bank = Bank(args.bank, 128)
        every = cfg["export"]["every_n_steps"]
        step, tick, tick_step = 0, time.monotonic(), 0
        while step < args.steps:
            ids, view_a, view_b = cat.batch(args.batch)
            z_a, p_a = enc(view_a)
            _, p_b = enc(view_b)
            loss = nt_xent(p_a, p_b)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            with torch.no_grad():
                z = F.normalize(z_a.detach(), dim=1)
                nn_ids, nn_scores = bank.neighbours(z, args.neighbours)
                bank.push(z, ids)
            if step % every == 0:
                msg = (step, ids.numpy(), z.to(torch.float16).numpy(), nn_ids.numpy(), nn_scores.numpy())
                while True:
                    try:
                        inbox.put(msg, timeout=1.0)
                        break
                    except queue.Full:
                        if not child.is_alive():
                            raise RuntimeError(f"exporter exited with code {child.exitcode}")
            if step % 10 == 0:
                now = time.monotonic()
                print(f"step {step} loss {loss.item():.4f} | {(step - tick_step) / (now - tick):.2f} it/s "
                      f"| exported {step // every} shards", flush=True)
                tick, tick_step = now, step
    except Interrupted:
        print("terminated, shutting the exporter down", flush=True)
    finally:
        if child is not None:
            try:
                inbox.put(None, timeout=1.0)
            except queue.Full:
                pass
            child.join(timeout=5)
            if child.is_alive():
                child.terminate()
                child.join(timeout=2)
        inbox.cancel_join_thread()
        if outdir is not None:
            shutil.rmtree(outdir, ignore_errors=True)


if __name__ == "__main__":
    main()
