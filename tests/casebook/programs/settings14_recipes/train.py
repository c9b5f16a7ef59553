"""Two-tower recipe retrieval: a user tower and a recipe tower (ingredients, cuisine, cook time, rating)
trained with a sampled softmax over the batch's positives and a set of shared negatives.

    start-up        seeding.seed_everything (seed and NumPy random API from the sampler config) and a synthetic
                    catalogue of recipes and users
    sampler thread  draws each batch: users, a positive recipe per user (mostly from the user's cuisine), and
                    `negatives` shared negative recipes drawn without replacement from the whole catalogue;
                    gathers their features and queues the batch
    main thread     trains the towers (logits of every user against every positive and negative, accidental
                    hits masked)

The sampler settings (seed, NumPy random API, catalogue and batch sizes) come from a TOML file, --config.

usage: python train.py [--config configs/sampler_paper.toml] [--steps N]

The paper config keeps NumPy's legacy global RandomState (np.random.seed / np.random.choice) so the negative
streams match the published runs; the legacy choice(n, k, replace=False) shuffles a permutation of the whole
catalogue on every call (O(n)), where Generator.choice samples k of n directly; public reports of the cost:
numpy/numpy#16268, numpy/numpy#2764, numpy/numpy#5158,
world-federation-of-advertisers/cardinality_estimation_evaluation_framework#14.
"""
import argparse
import os
import queue
import signal
import threading
import time
import tomllib

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import catalogue
import seeding

HERE = os.path.dirname(os.path.abspath(__file__))


def cli():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=os.path.join(HERE, "configs", "sampler_paper.toml"))
    ap.add_argument("--steps", type=int, default=2 ** 62)
    ap.add_argument("--lr", type=float, default=2e-3)
    return ap.parse_args()


class BatchSampler(threading.Thread):
    def __init__(self, cat, n_users, rng, batch, negatives, out, stop):
        super().__init__(name="sampler", daemon=True)
        self.cat, self.n_users, self.rng = cat, n_users, rng
        self.batch, self.negatives, self.out, self.stop = batch, negatives, out, stop
        self.error = None

    def draw(self):
        rng, cat, b = self.rng, self.cat, self.batch
        users = rng.choice(self.n_users, b)
        cz = cat.user_cuisine[users]
        within = cat.cuisine_start[cz] + (rng.random(b) * cat.cuisine_count[cz]).astype(np.int64)
        anywhere = (rng.random(b) * cat.n).astype(np.int64)
        pos = np.where(rng.random(b) < 0.2, anywhere, within)
        neg = rng.choice(cat.n, self.negatives, replace=False)
        items = np.concatenate([pos, neg])
        ingredients, cuisine, dense = cat.item_features(items)
        return {"user_cuisine": torch.from_numpy(cz), "user_dense": torch.from_numpy(cat.user_dense[users]),
                "items": torch.from_numpy(items), "ingredients": torch.from_numpy(ingredients),
                "item_cuisine": torch.from_numpy(cuisine), "item_dense": torch.from_numpy(dense)}

    def run(self):
        try:
            while not self.stop.is_set():
                item = self.draw()
                while not self.stop.is_set():
                    try:
                        self.out.put(item, timeout=0.25)
                        break
                    except queue.Full:
                        pass
        except Exception as exc:        # noqa: BLE001 - reported by the main thread
            self.error = exc


def mlp(n_in, hidden, n_out):
    return nn.Sequential(nn.Linear(n_in, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU(),
                         nn.Linear(hidden, n_out))


class TwoTower(nn.Module):
    def __init__(self, d=64, hidden=256):
        super().__init__()
        self.user_cuisine = nn.Embedding(catalogue.CUISINES, 32)
        self.user = mlp(32 + catalogue.USER_DENSE, hidden, d)
        self.ingredients = nn.EmbeddingBag(catalogue.INGREDIENTS, 48, mode="mean")
        self.item_cuisine = nn.Embedding(catalogue.CUISINES, 16)
        self.item = mlp(48 + 16 + 2, hidden, d)
        self.log_scale = nn.Parameter(torch.tensor(2.5))

    def forward(self, b):
        u = self.user(torch.cat([self.user_cuisine(b["user_cuisine"]), b["user_dense"]], 1))
        v = self.item(torch.cat([self.ingredients(b["ingredients"]), self.item_cuisine(b["item_cuisine"]),
                                 b["item_dense"]], 1))
        return F.normalize(u, dim=1) @ F.normalize(v, dim=1).T * self.log_scale.exp()


class Interrupted(BaseException):
    pass


def main():
    args = cli()
    if not os.path.isabs(args.config) and not os.path.exists(args.config):
        args.config = os.path.join(HERE, args.config)        # relative to the program's folder
    with open(args.config, "rb") as fh:
        cfg = tomllib.load(fh)
    torch.set_num_threads(1)
    rng = seeding.seed_everything(cfg["seed"]["value"], cfg["seed"]["numpy_api"])

    def on_signal(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise Interrupted()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    stop = threading.Event()
    threads = []
    try:
        cat = catalogue.Catalogue(cfg["catalogue"]["recipes"], cfg["catalogue"]["users"], seed=7)
        holdout = np.random.permutation(cfg["catalogue"]["users"])[:500]      # evaluation users, fixed per seed
        print(f"catalogue: {cat.n} recipes, {cfg['catalogue']['users']} users ({len(holdout)} held out), "
              f"numpy api {cfg['seed']['numpy_api']}", flush=True)
        batches = queue.Queue(maxsize=cfg["batches"]["queue_depth"])
        sampler = BatchSampler(cat, cfg["catalogue"]["users"], rng, cfg["batches"]["size"],
                               cfg["batches"]["negatives"], batches, stop)
        threads = [sampler]
        sampler.start()

        model = TwoTower()
        opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-5)
        bsz = cfg["batches"]["size"]
        target = torch.arange(bsz)
        step, tick, tick_step = 0, time.monotonic(), 0
        while step < args.steps:
            try:
                b = batches.get(timeout=2.0)
            except queue.Empty:
                if sampler.error is not None or not sampler.is_alive():
                    raise RuntimeError(f"sampler stopped: {sampler.error!r}")
                continue
            logits = model(b)
            # a candidate that is the user's own positive anywhere but on the diagonal is an accidental hit
            hit = b["items"][None, :] == b["items"][:bsz, None]
            hit[target, target] = False
            loss = F.cross_entropy(logits.masked_fill(hit, float("-inf")), target)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step % 10 == 0:
                now = time.monotonic()
                print(f"step {step} loss {loss.item():.4f} rate {(step - tick_step) / (now - tick):.1f}/s",
                      flush=True)
                tick, tick_step = now, step
    except Interrupted:
        print("interrupted, stopping the sampler", flush=True)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=2)


if __name__ == "__main__":
    main()
