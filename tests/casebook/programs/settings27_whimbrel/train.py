"""Contrastive pre-training of a flight-call encoder on two ranks (gloo, one process each).

Rank 0 is this process: it makes a scratch directory for the rendezvous file, starts rank 1 as a child
(`train.py --rank 1`, which exits as soon as its stdin closes) and prints one line per step."""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import timedelta

import flyway

HERE = os.path.dirname(os.path.abspath(__file__))
SCRATCH_PREFIX = "flyway-rdzv-"


def sweep_stale():
    """Removes rendezvous directories of runs that were killed before they could clean up."""
    root = tempfile.gettempdir()
    for name in os.listdir(root):
        if name.startswith(SCRATCH_PREFIX):
            owner = name[len(SCRATCH_PREFIX):].split("-")[0]
            if owner.isdigit() and int(owner) != os.getpid() and not os.path.exists(f"/proc/{owner}"):
                shutil.rmtree(os.path.join(root, name), ignore_errors=True)


def watch_parent():
    """Rank 1: leave as soon as rank 0 goes away (its end of our stdin closes)."""
    def _wait():
        try:
            while sys.stdin.buffer.read(1):
                pass
        finally:
            os._exit(0)
    threading.Thread(target=_wait, name="parent-watch", daemon=True).start()


def start_peer(config, rdzv):
    return subprocess.Popen([sys.executable, os.path.join(HERE, "train.py"), "--config", config,
                             "--rank", "1", "--rdzv", rdzv],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, cwd=HERE)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/flyway_shared.toml")
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--rdzv", default=None)
    args = ap.parse_args()
    cfg = flyway.load(args.config)
    rank = args.rank

    scratch, peer = None, None
    if rank == 0:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        sweep_stale()
        scratch = tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-")
        rdzv = os.path.join(scratch, "rendezvous")
        peer = start_peer(args.config, rdzv)
    else:
        rdzv = args.rdzv
        watch_parent()

    import torch
    import torch.distributed as dist
    from calls import CallBank, ViewFeeder
    from contrast import MoCo
    from torch.nn.parallel import DistributedDataParallel as DDP

    try:
        torch.set_num_threads(cfg.train.threads)
        dist.init_process_group(cfg.ddp.backend, init_method=f"file://{rdzv}", rank=rank,
                                world_size=cfg.ddp.world_size, timeout=timedelta(seconds=120))
        torch.manual_seed(cfg.train.seed)
        c, m = cfg.calls, cfg.moco
        model = MoCo(c.length, m.dim, m.queue, m.bank, m.temperature, m.momentum)
        ddp = DDP(model, forward_sync_buffers=cfg.ddp.sync_buffers, bucket_cap_mb=cfg.ddp.bucket_cap_mb,
                  gradient_as_bucket_view=cfg.ddp.gradient_as_bucket_view,
                  find_unused_parameters=cfg.ddp.find_unused_parameters)
        opt = torch.optim.AdamW([p for p in ddp.parameters() if p.requires_grad], lr=cfg.train.lr)
        feeder = ViewFeeder(CallBank(c.species, c.length, c.seed), c.batch, cfg.train.prefetch,
                            seed=c.seed * 100 + rank)
        feeder.start()
        if rank == 0:
            buf_mb = sum(b.numel() * b.element_size() for b in model.buffers()) / 2**20
            print(f"{cfg.name}: rank 1 is pid {peer.pid}; {buf_mb:.1f} MB of module buffers", flush=True)

        step, last = 0, time.perf_counter()
        while True:
            v1, v2, y = feeder.out.get()
            loss, q = ddp(v1, v2, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if rank == 0:
                now = time.perf_counter()
                extra = ""
                if step % cfg.moco.knn_every == 0:
                    extra = f" knn {model.knn_accuracy(q, y):.3f}"
                print(f"step {step} loss {loss.item():.4f} dt {1000 * (now - last):.1f}ms{extra}", flush=True)
                last = now
    finally:
        if peer is not None:
            if peer.poll() is None:
                peer.terminate()
                try:
                    peer.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    peer.kill()
                    peer.wait()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
        if rank == 0:
            sys.stdout.flush()
            os._exit(0)


if __name__ == "__main__":
    main()
