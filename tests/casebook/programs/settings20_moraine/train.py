"""Glacier surge detector: Kalman-filtered GNSS station tracks -> MLP.

A filter thread runs the (TorchScript) Kalman filter over each batch of station series
and queues the track features; the main thread trains the classifier.

    python train.py                                    # configs/glacier_debug.toml
    python train.py --config configs/glacier_ops.toml
"""
import argparse
import os
import queue
import signal
import threading
import tomllib

import runtime_flags

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CONFIG = os.path.join("configs", "glacier_debug.toml")


def load_config(path):
    for cand in (path, os.path.join(HERE, path)):
        if os.path.exists(cand):
            with open(cand, "rb") as f:
                return tomllib.load(f)
    raise SystemExit(f"config not found: {path}")


def filter_worker(sampler, out, stop):
    while not stop.is_set():
        item = sampler.batch()
        while not stop.is_set():
            try:
                out.put(item, timeout=0.2)
                break
            except queue.Full:
                continue


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=DEFAULT_CONFIG)
    ap.add_argument("--steps", type=int, default=10**9)
    args = ap.parse_args()
    cfg = load_config(args.config)
    runtime_flags.apply(cfg["runtime"])

    import torch
    from torch import nn
    import kalman

    torch.set_num_threads(1)
    torch.manual_seed(0)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    st, tr = cfg["stations"], cfg["train"]
    q = queue.Queue(maxsize=tr["queue_depth"])
    th = threading.Thread(target=filter_worker, name="kalman-filter", daemon=True,
                          args=(kalman.StationSampler(st), q, stop))
    th.start()

    n_in, h = 6 * st["channels"], tr["hidden"]
    model = nn.Sequential(nn.LayerNorm(n_in), nn.Linear(n_in, h), nn.GELU(), nn.Linear(h, h),
                          nn.GELU(), nn.Linear(h, h), nn.GELU(), nn.Linear(h, 3))
    opt = torch.optim.AdamW(model.parameters(), lr=tr["lr"])
    step = 0
    while not stop.is_set() and step < args.steps:
        try:
            x, y = q.get(timeout=0.5)
        except queue.Empty:
            if not th.is_alive() and not stop.is_set():
                raise SystemExit("the filter thread died")
            continue
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        print(f"step {step} loss {loss.item():.5f}", flush=True)
    stop.set()
    th.join(timeout=5)


if __name__ == "__main__":
    main()
