import argparse
import time

import torch
import torch.nn as nn

import survey_config
from ingest import FEATURES, SheetIngest


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/estuary_counts.toml")
    args = ap.parse_args()
    cfg = survey_config.load(args.config)
    torch.set_num_threads(cfg.train.threads)
    torch.manual_seed(cfg.train.seed)

    ingest = SheetIngest(cfg, cfg.train.seed + 13)
    ingest.start()
    ingest.ready.wait()
    print(f"{cfg.name}: survey spool ready", flush=True)

    h = cfg.train.hidden
    model = nn.Sequential(nn.Linear(FEATURES, h), nn.LayerNorm(h), nn.GELU(), nn.Linear(h, h), nn.LayerNorm(h),
                          nn.GELU(), nn.Linear(h, h), nn.GELU(), nn.Linear(h, 4))
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.train.lr)
    loss_fn = nn.CrossEntropyLoss()
    step = 0
    last = time.perf_counter()
    while True:
        x, y = ingest.out.get()
        logits = model(x)
        loss = loss_fn(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        now = time.perf_counter()
        print(f"step {step} loss {loss.item():.4f} n {len(y)} dt {1000 * (now - last):.1f}ms", flush=True)
        last = now


if __name__ == "__main__":
    main()
