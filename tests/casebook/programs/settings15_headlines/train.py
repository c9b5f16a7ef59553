"""Topic classifier for a wire-service monitor, trained on de-duplicated crawl shards.

    crawl       a thread that draws a crawl shard of headlines from the story catalogue (wire.Catalogue),
                writes it to the run's scratch directory, de-duplicates it case-insensitively with the system
                sort in a child process (dedup.ShardDeduper: sort -f -u) and cuts the unique headlines into
                batches for the queue
    main thread trains an EmbeddingBag + MLP topic classifier

Settings come from a TOML file, --config; the scratch directory is a temporary directory removed at exit.

usage: python train.py [--config configs/dedup_platform.toml] [--steps N]

The sort child runs with LC_ALL set to [dedup] collation: under a UTF-8 locale GNU sort compares with the
locale's multibyte case folding and collation (strcoll) instead of bytes, several times the work per
comparison; public reports: ARTFL-Project/PhiloLogic4#480, ewwink/wikipedia-wordlists-extractor#2,
jlevy/the-art-of-command-line#22.
"""
import argparse
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import tomllib

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import dedup
import wire

HERE = os.path.dirname(os.path.abspath(__file__))


def cli():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=os.path.join(HERE, "configs", "dedup_platform.toml"))
    ap.add_argument("--steps", type=int, default=2 ** 62)
    ap.add_argument("--lr", type=float, default=3e-3)
    return ap.parse_args()


class TopicModel(nn.Module):
    def __init__(self, vocab, dim, topics):
        super().__init__()
        self.bag = nn.EmbeddingBag(vocab, dim, mode="mean", padding_idx=0)
        self.head = nn.Sequential(nn.Linear(dim, 2 * dim), nn.ReLU(), nn.Linear(2 * dim, topics))

    def forward(self, tokens):
        return self.head(self.bag(tokens))


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
    scratch = tempfile.mkdtemp(prefix="wire-shards-")
    stop = threading.Event()
    batches = queue.Queue(maxsize=cfg["batches"]["queue_depth"])
    state = {"shards": 0, "raw": 0, "unique": 0, "error": None}

    def on_signal(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise Interrupted()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    crawl = None
    try:
        cat = wire.Catalogue(cfg["catalogue"]["stories"], cfg["catalogue"]["seq_len"])
        # topic list for the dashboards, in the reader's collation
        labels = os.path.join(scratch, "topics.txt")
        with open(labels, "w", encoding="utf-8") as fh:
            fh.write("\n".join(wire.TOPICS) + "\n")
        topic_order = subprocess.run(["sort", labels], env=dedup.sort_env("C.UTF-8"), stdout=subprocess.PIPE,
                                     check=True).stdout.decode().split()
        deduper = dedup.ShardDeduper(scratch, cfg["dedup"]["collation"])
        shard_lines, batch = cfg["crawl"]["shard_lines"], cfg["batches"]["size"]

        def crawl_main():
            try:
                rng = np.random.default_rng(1)
                n = 0
                while not stop.is_set():
                    pick = rng.integers(0, len(cat.texts), shard_lines)
                    path = os.path.join(scratch, f"shard-{n % 4:02d}.tsv")
                    with open(path, "w", encoding="utf-8") as fh:
                        fh.write("\n".join([cat.texts[i] for i in pick]))
                        fh.write("\n")
                    unique = deduper.unique_lines(path)
                    stories = np.fromiter((cat.story_of[line] for line in unique), dtype=np.int64,
                                          count=len(unique))
                    rng.shuffle(stories)
                    state["shards"] += 1
                    state["raw"] += shard_lines
                    state["unique"] += len(stories)
                    n += 1
                    for i in range(0, len(stories) - batch + 1, batch):
                        ids = stories[i:i + batch]
                        item = (torch.from_numpy(cat.tokens[ids]), torch.from_numpy(cat.topic[ids]))
                        while not stop.is_set():
                            try:
                                batches.put(item, timeout=0.25)
                                break
                            except queue.Full:
                                pass
            except Exception as exc:       # noqa: BLE001 - reported by the main thread
                state["error"] = exc

        crawl = threading.Thread(target=crawl_main, name="crawl", daemon=True)
        crawl.start()
        print(f"wire topics ({', '.join(topic_order)}): {len(cat.texts)} headline variants of "
              f"{cfg['catalogue']['stories']} stories, shards of {shard_lines}, dedup collation "
              f"{cfg['dedup']['collation']}", flush=True)
        model = TopicModel(cat.vocab_size, cfg["model"]["dim"], len(wire.TOPICS))
        opt = torch.optim.Adam(model.parameters(), lr=args.lr)
        step, tick, tick_step = 0, time.monotonic(), 0
        while step < args.steps:
            try:
                tokens, topic = batches.get(timeout=2.0)
            except queue.Empty:
                if state["error"] is not None or not crawl.is_alive():
                    raise RuntimeError(f"crawl reader stopped: {state['error']!r}")
                continue
            loss = F.cross_entropy(model(tokens), topic)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            now = time.monotonic()
            if now - tick >= 1.0:
                print(f"step {step} loss {loss.item():.4f} rate {(step - tick_step) / (now - tick):.1f}/s "
                      f"shards {state['shards']} unique {state['unique']}/{state['raw']}", flush=True)
                tick, tick_step = now, step
    except Interrupted:
        print("interrupted, stopping the crawl reader", flush=True)
    finally:
        stop.set()
        if crawl is not None:
            crawl.join(timeout=2)
        shutil.rmtree(scratch, ignore_errors=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
