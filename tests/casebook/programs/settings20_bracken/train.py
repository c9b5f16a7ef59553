"""Abstract-topic classifier over tokenised shards (EmbeddingBag + MLP).

A loader thread torch.load's the shards one after the other and cuts them into batches;
the main thread trains.

    python train.py                                   # configs/hardened.toml
    python train.py --config configs/workstation.toml
"""
import argparse
import os
import queue
import shutil
import signal
import threading
import tomllib

import security

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CONFIG = os.path.join("configs", "hardened.toml")


def load_config(path):
    for cand in (path, os.path.join(HERE, path)):
        if os.path.exists(cand):
            with open(cand, "rb") as f:
                return tomllib.load(f)
    raise SystemExit(f"config not found: {path}")


def loader(paths, batch, out, stop):
    import shards
    while not stop.is_set():
        for p in paths:
            recs = shards.load_shard(p)
            for item in shards.batches(recs, batch):
                while not stop.is_set():
                    try:
                        out.put(item, timeout=0.2)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=DEFAULT_CONFIG)
    ap.add_argument("--steps", type=int, default=10**9)
    args = ap.parse_args()
    cfg = load_config(args.config)
    security.apply(cfg["security"])

    import torch
    from torch import nn
    import shards

    torch.set_num_threads(1)
    torch.manual_seed(0)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    cd, tr = cfg["corpus"], cfg["train"]
    shards.sweep_stale()
    root, paths = shards.build(cd)
    try:
        q = queue.Queue(maxsize=tr["queue_depth"])
        th = threading.Thread(target=loader, name="shard-loader", daemon=True,
                              args=(paths, cd["batch"], q, stop))
        th.start()
        emb = nn.EmbeddingBag(cd["vocab"], tr["dim"], mode="mean")
        head = nn.Sequential(nn.Linear(tr["dim"], tr["hidden"]), nn.GELU(),
                             nn.Linear(tr["hidden"], tr["hidden"]), nn.GELU(),
                             nn.Linear(tr["hidden"], 5))
        params = list(emb.parameters()) + list(head.parameters())
        opt = torch.optim.AdamW(params, lr=tr["lr"])
        step = 0
        while not stop.is_set() and step < args.steps:
            try:
                toks, offsets, labels = q.get(timeout=0.5)
            except queue.Empty:
                if not th.is_alive() and not stop.is_set():
                    raise SystemExit("the shard loader died")
                continue
            loss = nn.functional.cross_entropy(head(emb(toks, offsets)), labels)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            print(f"step {step} loss {loss.item():.5f}", flush=True)
    finally:
        stop.set()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
