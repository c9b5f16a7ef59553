"""Tree-species classifier for airborne LiDAR plots, trained data-parallel on two CPU ranks.

Rank 0 (this process) exports the profile's [runtime] environment, starts the rank-1 worker
(the same script with --rank 1), and both join a gloo process group. On every rank a plot
loader thread builds batches of plot features (plots.py) into a queue; the training loop
runs forward/backward on its own batch, averages the gradients over the ranks
(gradsync.py: bucketed all-reduce) and steps the optimizer. Rank 0 prints the progress.

    python train.py                                 # configs/survey_fleet.toml
    python train.py --config configs/survey_bench.toml
"""
import argparse
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import tomllib

import runtime

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CONFIG = os.path.join("configs", "survey_fleet.toml")


def load_config(path):
    for cand in (path, os.path.join(HERE, path)):
        if os.path.exists(cand):
            with open(cand, "rb") as f:
                return tomllib.load(f)
    raise SystemExit(f"config not found: {path}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def watch_parent(ppid):
    while True:
        if os.getppid() != ppid:
            os._exit(0)
        time.sleep(0.5)


def plot_loader(sampler, batch, out, stop):
    while not stop.is_set():
        x, y = sampler.batch(batch)
        while not stop.is_set():
            try:
                out.put((x, y), timeout=0.2)
                break
            except queue.Full:
                continue


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=DEFAULT_CONFIG)
    ap.add_argument("--steps", type=int, default=10**9)
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    cfg = load_config(args.config)
    tr, dc = cfg["train"], cfg["data"]
    runtime.export(cfg["runtime"])

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    world = 2
    worker = None
    port = args.port
    if args.rank == 0:
        port = free_port()
        worker = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--config", args.config, "--rank", "1",
             "--port", str(port)], cwd=os.getcwd(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    else:
        threading.Thread(target=watch_parent, args=(os.getppid(),), daemon=True).start()

    import numpy as np
    import torch
    import torch.distributed as dist
    from torch import nn

    import gradsync
    import plots

    torch.set_num_threads(1)
    try:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=args.rank,
                                world_size=world)
        torch.manual_seed(0)
        h = tr["hidden"]
        layers, width = [], plots.N_FEAT
        for _ in range(tr["depth"]):
            layers += [nn.Linear(width, h), nn.LayerNorm(h), nn.GELU()]
            width = h
        model = nn.Sequential(*layers, nn.Linear(width, len(plots.SPECIES)))
        for p in model.parameters():
            dist.broadcast(p.data, src=0)
        opt = torch.optim.AdamW(model.parameters(), lr=tr["lr"], weight_decay=0.01)
        averager = gradsync.GradientAverager(model.parameters(), tr["bucket_kb"])

        q = queue.Queue(maxsize=tr["queue_depth"])
        sampler = plots.PlotSampler(seed=100 + args.rank, points=dc["points"])
        loader = threading.Thread(target=plot_loader, name="plot-loader", daemon=True,
                                  args=(sampler, dc["batch"], q, stop))
        loader.start()
        step = 0
        while not stop.is_set() and step < args.steps:
            try:
                x, y = q.get(timeout=0.5)
            except queue.Empty:
                if worker is not None and worker.poll() is not None:
                    raise SystemExit("the rank-1 worker exited") from None
                continue
            x, y = torch.from_numpy(x), torch.from_numpy(y)
            logits = model(x)
            loss = nn.functional.cross_entropy(logits, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            averager.sync()
            opt.step()
            correct = int((logits.argmax(1) == y).sum())
            mean_loss, acc = gradsync.reduce_metrics(loss.item(), correct, len(y))
            step += 1
            if args.rank == 0:
                print(f"step {step} loss {mean_loss:.5f} acc {acc:.3f}", flush=True)
    finally:
        stop.set()
        if worker is not None and worker.poll() is None:
            worker.terminate()
            try:
                worker.wait(timeout=3)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
        if args.rank != 0:
            os._exit(0)


if __name__ == "__main__":
    main()
