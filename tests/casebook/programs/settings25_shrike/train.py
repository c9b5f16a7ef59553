import argparse
import signal
import sys
import time

import sitecfg


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/field_laptop.toml")
    args = ap.parse_args()
    cfg = sitecfg.load(args.config)

    import torch
    import torch.nn as nn

    from loader import ClipLoader

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))   # so the spool directory is removed
    torch.set_num_threads(cfg.train.threads)
    torch.manual_seed(cfg.train.seed)
    loader = ClipLoader(cfg, cfg.train.seed + 11)
    loader.start()
    while not loader.ready.wait(0.5):
        if not loader.is_alive():
            raise SystemExit("loader thread died during start-up")
    print(f"{cfg.name}: {cfg.archive.shards} recorder shards spooled in {loader.spool.dir}", flush=True)

    ch = cfg.train.channels
    model = nn.Sequential(
        nn.Conv2d(1, ch, 3, padding=1), nn.BatchNorm2d(ch), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(ch, 2 * ch, 3, padding=1), nn.BatchNorm2d(2 * ch), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(2 * ch, 2 * ch, 3, padding=1), nn.BatchNorm2d(2 * ch), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2 * ch, cfg.archive.call_types))
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.train.lr)
    loss_fn = nn.CrossEntropyLoss()
    step = 0
    last = time.perf_counter()
    try:
        while True:
            x, y = loader.out.get()
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
        loader.stop.set()
        loader.spool.remove()


if __name__ == "__main__":
    main()
