import argparse
import multiprocessing as mp
import signal
import sys
import time

import corriecfg
import reports


def start_pool(cfg):
    p = cfg.pool
    ctx = mp.get_context(p.start_method)
    pool = ctx.Pool(processes=p.workers, maxtasksperchild=p.maxtasksperchild or None)
    if p.warm_up:
        pool.map(reports.warm, range(4 * p.workers))
    return pool


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/ridge_archive.toml")
    args = ap.parse_args()
    cfg = corriecfg.load(args.config)
    archive = reports.build_archive(cfg)
    pool = start_pool(cfg)            # forked before torch starts its thread pools
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))   # run the finally: clean-up on a plain kill

    import torch
    import torch.nn as nn

    from feeder import ReportFeeder

    torch.set_num_threads(cfg.train.threads)
    torch.manual_seed(cfg.train.seed)
    feeder = ReportFeeder(cfg, pool, archive, cfg.train.seed + 11)
    feeder.start()
    print(f"{cfg.name}: {len(archive)} archived reports, parser pool of {cfg.pool.workers}", flush=True)

    h = cfg.train.hidden
    model = nn.Sequential(nn.Linear(24, h), nn.LayerNorm(h), nn.GELU(),
                          nn.Linear(h, h), nn.LayerNorm(h), nn.GELU(),
                          nn.Linear(h, h), nn.LayerNorm(h), nn.GELU(),
                          nn.Linear(h, cfg.network.regimes))
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.train.lr)
    loss_fn = nn.CrossEntropyLoss()
    step = 0
    last = time.perf_counter()
    try:
        while True:
            x, y = feeder.out.get()
            loss = loss_fn(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            now = time.perf_counter()
            print(f"step {step} loss {loss.item():.4f} n {len(y)} dt {1000 * (now - last):.1f}ms", flush=True)
            last = now
    finally:
        pool.terminate()


if __name__ == "__main__":
    main()
