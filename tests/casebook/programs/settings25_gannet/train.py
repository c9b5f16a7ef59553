import argparse
import os
import subprocess
import sys
import time

import hubcfg


def start_gateway(cfg):
    c = cfg.colony
    proc = subprocess.Popen(
        [sys.executable, os.path.join(hubcfg.HERE, "gateway.py"), "--stations", str(c.stations),
         "--channels", str(c.channels), "--record-len", str(c.record_len), "--states", str(c.states),
         "--seed", str(c.seed)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    return proc, int(proc.stdout.readline())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/colony_watch.toml")
    args = ap.parse_args()
    cfg = hubcfg.load(args.config)

    import torch
    import torch.nn as nn

    from hub import StationHub

    torch.set_num_threads(cfg.train.threads)
    torch.manual_seed(cfg.train.seed)
    gateway, port = start_gateway(cfg)
    hub = StationHub(cfg, port, cfg.train.seed + 5)
    hub.start()
    while not hub.ready.wait(0.5):
        if not hub.is_alive():
            raise SystemExit("hub thread died during start-up")
    print(f"{cfg.name}: hub connected to {cfg.colony.stations} nest-box loggers (gateway port {port})", flush=True)

    ch = cfg.train.channels
    model = nn.Sequential(
        nn.Conv1d(cfg.colony.channels, ch, 7, padding=3), nn.BatchNorm1d(ch), nn.GELU(),
        nn.Conv1d(ch, ch, 5, padding=2, stride=2), nn.BatchNorm1d(ch), nn.GELU(),
        nn.Conv1d(ch, 2 * ch, 3, padding=1, stride=2), nn.BatchNorm1d(2 * ch), nn.GELU(),
        nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(2 * ch, cfg.colony.states))
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.train.lr)
    loss_fn = nn.CrossEntropyLoss()
    step = 0
    last = time.perf_counter()
    try:
        while True:
            x, y = hub.out.get()
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
        gateway.terminate()


if __name__ == "__main__":
    main()
