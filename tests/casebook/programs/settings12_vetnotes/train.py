"""Clinic triage model: predicts a visit's urgency (routine / soon / urgent / critical) from its rendered note.

Pipeline (one process):

    main thread      submits batch jobs to the note pool a few batches ahead, trains an EmbeddingBag + MLP on the
                     hashed note features as the jobs complete
    note pool        two worker threads; a job draws a batch of visit records, renders each record's note with the
                     Jinja2 template of its visit kind (templates/*.j2), and hashes the notes into features

usage: python train.py [--template-profile authoring|frozen] [--batch 128] [--steps N]
"""
import argparse
import collections
import random
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import torch
import torch.nn.functional as F
from torch import nn

from triage import featurize, records, templating


def get_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--template-profile", choices=sorted(templating.PROFILES), default="authoring")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--prefetch", type=int, default=4)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--steps", type=int, default=1 << 40)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--log-every", type=int, default=10)
    return p.parse_args(argv)


class TriageNet(nn.Module):
    def __init__(self, dim=64, hidden=256, classes=4):
        super().__init__()
        self.bag = nn.EmbeddingBag(featurize.BUCKETS, dim, mode="mean")
        self.mlp = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, hidden),
                                 nn.GELU(), nn.Linear(hidden, hidden), nn.GELU(), nn.Linear(hidden, classes))

    def forward(self, ids, offsets):
        return self.mlp(self.bag(ids, offsets))


def make_job(env, batch):
    """Render and featurize one batch of visits (runs on a note-pool thread)."""
    def job(seed):
        rng = random.Random(seed)
        visits = [records.visit(rng) for _ in range(batch)]
        by_kind = collections.defaultdict(list)
        for i, v in enumerate(visits):
            by_kind[v["kind"]].append(i)
        notes = [None] * batch
        for kind, idx in by_kind.items():
            tpl = env.get_template(f"{kind}.j2")
            for i in idx:
                notes[i] = tpl.render(**visits[i])
        return featurize.collate(notes, [v["label"] for v in visits])
    return job


class Stop(Exception):
    pass


def main(argv=None):
    args = get_args(argv)
    torch.manual_seed(13)
    torch.set_num_threads(1)

    stopping = threading.Event()

    def _term(signum, _frame):
        stopping.set()
        raise Stop(signum)

    signal.signal(signal.SIGTERM, _term)
    signal.signal(signal.SIGINT, _term)

    env = templating.build_environment(args.template_profile)
    names = templating.lint(env)
    print(f"templates ok: {', '.join(sorted(names))} (profile {args.template_profile})", flush=True)

    model = TriageNet()
    dense = [p for n, p in model.named_parameters() if not n.startswith("bag.")]
    opt = torch.optim.AdamW([{"params": dense, "weight_decay": 0.01},
                             {"params": model.bag.parameters(), "weight_decay": 0.0}], lr=args.lr, foreach=True)
    job = make_job(env, args.batch)
    pool = ThreadPoolExecutor(max_workers=args.workers, thread_name_prefix="note-pool")
    inflight = collections.deque(pool.submit(job, s) for s in range(args.prefetch))
    next_seed = args.prefetch
    ema, step, t_last, s_last = None, 0, time.perf_counter(), 0
    try:
        while step < args.steps and not stopping.is_set():
            ids, offsets, y = inflight.popleft().result()
            inflight.append(pool.submit(job, next_seed))
            next_seed += 1
            logits = model(ids, offsets)
            loss = F.cross_entropy(logits, y, label_smoothing=0.05)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            ema = loss.item() if ema is None else 0.95 * ema + 0.05 * loss.item()
            if step % args.log_every == 0:
                now = time.perf_counter()
                print(f"step {step} loss {ema:.4f} ({(step - s_last) / (now - t_last):.2f} steps/s)", flush=True)
                t_last, s_last = now, step
    except Stop:
        print("signal received, stopping", flush=True)
    finally:
        stopping.set()
        for f in inflight:
            f.cancel()
        pool.shutdown(wait=True, cancel_futures=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
