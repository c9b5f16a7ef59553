"""Shingle-spit shorebird call classifier: clips stream in from the station archive, are spooled,
decoded and turned into band energies by a small thread pool; the main thread trains a Conv1d net."""
import argparse
import os
import shutil
import signal
import sys
import tempfile
import time

import archive
import spitcfg
from decode import Batcher, ClipDecoder

SCRATCH_PREFIX = "tombolo-spool-"


def sweep_stale():
    root = tempfile.gettempdir()
    for name in os.listdir(root):
        if name.startswith(SCRATCH_PREFIX):
            owner = name[len(SCRATCH_PREFIX):].split("-")[0]
            if owner.isdigit() and int(owner) != os.getpid() and not os.path.exists(f"/proc/{owner}"):
                shutil.rmtree(os.path.join(root, name), ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/spit_station.toml")
    args = ap.parse_args()
    cfg = spitcfg.load(args.config)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    sweep_stale()
    scratch = tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-")
    try:
        import torch
        import torch.nn as nn

        a, sp, tr = cfg.archive, cfg.spool, cfg.train
        t0 = time.perf_counter()
        blobs, labels = archive.build(a.clips, a.sample_rate, a.seconds, a.seed)
        client = archive.ArchiveClient(blobs, sp.chunk_kb * 1024)
        decoder = ClipDecoder(client, scratch if sp.dir == "scratch" else sp.dir, sp.max_in_memory_kb * 1024,
                              cfg.features.n_fft, cfg.features.hop, cfg.features.bands, a.sample_rate)
        batcher = Batcher(decoder, labels, tr.batch, cfg.pool.workers, cfg.pool.prefetch, a.seed + 1)
        print(f"{cfg.name}: {len(blobs)} clips ({sum(map(len, blobs)) / 2**20:.0f} MB) in "
              f"{time.perf_counter() - t0:.1f}s; spool {sp.max_in_memory_kb} KB in memory", flush=True)
        batcher.start()

        torch.set_num_threads(tr.threads)
        torch.manual_seed(tr.seed)
        b, ch = cfg.features.bands, tr.channels
        model = nn.Sequential(
            nn.Conv1d(b, ch, 5, padding=2), nn.BatchNorm1d(ch), nn.GELU(),
            nn.Conv1d(ch, ch, 5, padding=2, stride=2), nn.BatchNorm1d(ch), nn.GELU(),
            nn.Conv1d(ch, ch, 5, padding=2, stride=2), nn.BatchNorm1d(ch), nn.GELU(),
            nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(ch, len(archive.SPECIES)))
        opt = torch.optim.AdamW(model.parameters(), lr=tr.lr)
        loss_fn = nn.CrossEntropyLoss()
        step, last = 0, time.perf_counter()
        while True:
            x, y = batcher.out.get()
            loss = loss_fn(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            now = time.perf_counter()
            print(f"step {step} loss {loss.item():.4f} dt {1000 * (now - last):.1f}ms", flush=True)
            last = now
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
