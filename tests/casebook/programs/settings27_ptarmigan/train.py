"""Behaviour classifier for rock-ptarmigan collar telemetry. Two capture threads spool each uplinked
record as a file (tmp/ -> new/), a loader thread reads and removes them and batches the bursts, a
status thread writes the run's progress file, and the main thread trains a Conv1d model."""
import argparse
import json
import os
import queue
import signal
import sys
import threading
import time

import collarcfg
from collars import BEHAVIOURS, Capture, Loader
from spool import Spool


def status_writer(path, every_s, progress):
    def _run():
        while True:
            time.sleep(every_s)
            tmp = path + ".tmp"
            with open(tmp, "w") as f:
                json.dump(progress, f)
            os.replace(tmp, path)
    threading.Thread(target=_run, name="status", daemon=True).start()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/fell_station.toml")
    args = ap.parse_args()
    cfg = collarcfg.load(args.config)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    sp = cfg.spool
    spool = Spool(sp.root, list(sp.dir_attributes) + (["dirsync"] if sp.durable_dirs else []))
    try:
        import torch
        import torch.nn as nn

        tr = cfg.train
        torch.set_num_threads(tr.threads)
        torch.manual_seed(tr.seed)
        arrivals = queue.Queue(maxsize=cfg.uplink.backlog)
        ids = list(range(cfg.uplink.first_collar, cfg.uplink.first_collar + cfg.uplink.collars))
        for k in range(cfg.uplink.capture_threads):
            Capture(spool, arrivals, ids, seed=cfg.uplink.seed + k).start()
        loader = Loader(spool, arrivals, tr.batch, tr.prefetch)
        loader.start()
        progress = {"name": cfg.name, "step": 0, "loss": None}
        status_writer(os.path.join(spool.base, "status.json"), cfg.status.every_s, progress)
        print(f"{cfg.name}: spool {spool.base} (attributes: {', '.join(sp.dir_attributes) or 'none'}"
              f"{', durable' if sp.durable_dirs else ''})", flush=True)

        ch = tr.channels
        model = nn.Sequential(
            nn.Conv1d(3, ch, 7, padding=3), nn.BatchNorm1d(ch), nn.ReLU(),
            nn.Conv1d(ch, ch, 7, padding=3, stride=2), nn.BatchNorm1d(ch), nn.ReLU(),
            nn.Conv1d(ch, ch, 7, padding=3, stride=2), nn.BatchNorm1d(ch), nn.ReLU(),
            nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(ch, len(BEHAVIOURS)))
        opt = torch.optim.AdamW(model.parameters(), lr=tr.lr)
        loss_fn = nn.CrossEntropyLoss()
        step, last = 0, time.perf_counter()
        while True:
            x, y = loader.out.get()
            loss = loss_fn(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            progress["step"], progress["loss"] = step, round(loss.item(), 4)
            now = time.perf_counter()
            print(f"step {step} loss {loss.item():.4f} dt {1000 * (now - last):.1f}ms", flush=True)
            last = now
    finally:
        spool.remove()


if __name__ == "__main__":
    main()
