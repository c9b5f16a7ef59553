"""Per-tree yield regression for an orchard survey service: a small CNN over each tree's NDVI crown patch
plus canopy height, row and irrigation zone, trained on the drone survey's shards.

    survey shards   JSON-lines shards (survey.write_shard) written at start-up into a temporary scratch
                    directory, removed at exit
    decoder         a child process per shard (decode_shard.py, started by launcher.ShardDecoder with the
                    environment of launcher.decoder_env) that decodes the shard into an .npz
    loader          a thread that runs the decoder on the next shard, loads its arrays, shuffles them and
                    puts batches on a queue
    main thread     trains the CNN regressor of log yield

Settings come from a TOML file, --config.

usage: python train.py [--config configs/survey_scratch.toml] [--steps N]

With bytecode_cache = "scratch" every decoder child runs with PYTHONPYCACHEPREFIX pointing at an empty
directory and PYTHONDONTWRITEBYTECODE=1: the import system looks for .pyc files only under the prefix,
finds none and can never write one, so each child compiles every module it imports (the stdlib's, numpy's)
from source again; public reports: python/cpython#107631, haikuports/haikuports#5347,
advancedtelematic/meta-updater#461.
"""
import argparse
import os
import queue
import shutil
import signal
import sys
import tempfile
import threading
import time
import tomllib

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import launcher
import survey

HERE = os.path.dirname(os.path.abspath(__file__))


def cli():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=os.path.join(HERE, "configs", "survey_scratch.toml"))
    ap.add_argument("--steps", type=int, default=2 ** 62)
    ap.add_argument("--lr", type=float, default=2e-3)
    return ap.parse_args()


class YieldNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(1, 8, 3, stride=2, padding=1), nn.ReLU(),
                                  nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2))
        self.zone = nn.Embedding(survey.ZONES, 8)
        self.head = nn.Sequential(nn.Linear(16 * 4 + 8 + 4, 128), nn.ReLU(), nn.Linear(128, 1))

    def forward(self, patch, tab, zone):
        h = self.conv(patch.unsqueeze(1)).flatten(1)
        return self.head(torch.cat([h, self.zone(zone), tab], 1)).squeeze(1)


class Interrupted(BaseException):
    pass


def main():
    args = cli()
    if not os.path.isabs(args.config) and not os.path.exists(args.config):
        args.config = os.path.join(HERE, args.config)
    with open(args.config, "rb") as fh:
        cfg = tomllib.load(fh)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    scratch = tempfile.mkdtemp(prefix="orchard-survey-")
    stop = threading.Event()
    batch = cfg["batches"]["size"]
    batches = queue.Queue(maxsize=cfg["batches"]["queue_depth"])
    state = {"shards": 0, "error": None}
    decoder = launcher.ShardDecoder(cfg["decoder"]["bytecode_cache"], scratch)
    loader = None

    def on_signal(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise Interrupted()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        shards = []
        for i in range(cfg["survey"]["shards"]):
            path = os.path.join(scratch, f"block-{i:02d}.jsonl")
            survey.write_shard(path, 100 + i, cfg["survey"]["tiles_per_shard"])
            shards.append(path)

        def loader_main():
            try:
                rng = np.random.default_rng(2)
                k = 0
                while not stop.is_set():
                    out = os.path.join(scratch, f"decoded-{k % 2}.npz")
                    decoder.decode(shards[k % len(shards)], out)
                    with np.load(out) as z:
                        patches, tab, zone, y = z["patches"], z["tab"], z["zone"], z["y"]
                    k += 1
                    state["shards"] += 1
                    order = rng.permutation(len(y))
                    for i in range(0, len(order) - batch + 1, batch):
                        idx = order[i:i + batch]
                        item = (torch.from_numpy(patches[idx]), torch.from_numpy(tab[idx]),
                                torch.from_numpy(zone[idx]), torch.from_numpy(np.log1p(y[idx])))
                        while not stop.is_set():
                            try:
                                batches.put(item, timeout=0.25)
                                break
                            except queue.Full:
                                pass
            except Exception as exc:       # noqa: BLE001 - reported by the main thread
                if not stop.is_set():
                    state["error"] = exc

        loader = threading.Thread(target=loader_main, name="loader", daemon=True)
        loader.start()
        print(f"orchard yield: {len(shards)} survey shards of {cfg['survey']['tiles_per_shard']} trees in "
              f"{scratch}, decoder bytecode cache {cfg['decoder']['bytecode_cache']}, batch {batch}", flush=True)
        model = YieldNet()
        opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
        step, tick, tick_step = 0, time.monotonic(), 0
        while step < args.steps:
            try:
                patch, tab, zone, y = batches.get(timeout=2.0)
            except queue.Empty:
                if state["error"] is not None or not loader.is_alive():
                    raise RuntimeError(f"shard loader stopped: {state['error']!r}")
                continue
            loss = F.smooth_l1_loss(model(patch, tab, zone), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            now = time.monotonic()
            if now - tick >= 1.0:
                print(f"step {step} loss {loss.item():.4f} rate {(step - tick_step) / (now - tick):.1f}/s "
                      f"shards {state['shards']}", flush=True)
                tick, tick_step = now, step
    except Interrupted:
        print("interrupted, stopping the loader and the decoder", flush=True)
    finally:
        stop.set()
        decoder.kill()
        if loader is not None:
            loader.join(timeout=1.5)
        decoder.kill()
        shutil.rmtree(scratch, ignore_errors=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
