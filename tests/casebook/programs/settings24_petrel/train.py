import argparse
import os
import subprocess
import sys
import time

import fieldcfg


def start_colony_service(cfg):
    cert, key = fieldcfg.server_paths(cfg)
    c = cfg.colony
    proc = subprocess.Popen(
        [sys.executable, os.path.join(fieldcfg.HERE, "colonyd.py"), "--cert", cert, "--key", key,
         "--min-version", cfg.tls.minimum_version, "--colonies", str(c.colonies), "--birds", str(c.birds),
         "--track-len", str(c.track_len), "--behaviours", str(c.behaviours), "--seed", str(c.seed)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    port = int(proc.stdout.readline())
    return proc, port


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/lab_bench.toml")
    args = ap.parse_args()
    cfg = fieldcfg.load(args.config)

    import torch
    import torch.nn as nn

    from fetch import TrackFetcher

    torch.set_num_threads(cfg.train.threads)
    torch.manual_seed(cfg.train.seed)
    server, port = start_colony_service(cfg)
    fetcher = TrackFetcher(port, cfg, cfg.train.seed + 9)
    fetcher.start()
    print(f"{cfg.name}: colony service on port {port}", flush=True)

    ch = cfg.train.channels
    model = nn.Sequential(
        nn.Conv1d(9, ch, 5, padding=2), nn.BatchNorm1d(ch), nn.GELU(),
        nn.Conv1d(ch, ch, 5, padding=2, stride=2), nn.BatchNorm1d(ch), nn.GELU(),
        nn.Conv1d(ch, 2 * ch, 3, padding=1, stride=2), nn.BatchNorm1d(2 * ch), nn.GELU(),
        nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(2 * ch, cfg.colony.behaviours))
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.train.lr)
    loss_fn = nn.CrossEntropyLoss()
    step = 0
    last = time.perf_counter()
    try:
        while True:
            x, y = fetcher.out.get()
            logits = model(x)
            loss = loss_fn(logits, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            now = time.perf_counter()
            print(f"step {step} loss {loss.item():.4f} n {len(y)} dt {1000 * (now - last):.1f}ms", flush=True)
            last = now
    finally:
        server.terminate()


if __name__ == "__main__":
    main()
