import argparse
import time

import torch
import torch.nn as nn

import settings
from loader import SiteBatchLoader


def build_model(in_dim, hidden, depth, classes):
    layers = []
    d = in_dim
    for _ in range(depth):
        layers += [nn.Linear(d, hidden), nn.LayerNorm(hidden), nn.GELU()]
        d = hidden
    layers.append(nn.Linear(d, classes))
    return nn.Sequential(*layers)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/lab_replay.toml")
    args = ap.parse_args()
    cfg = settings.read(args.config)
    torch.set_num_threads(cfg.train.threads)
    torch.manual_seed(cfg.train.seed)

    loader = SiteBatchLoader(cfg.catalog, cfg.loader, cfg.train.seed + 17)
    loader.start()
    loader.ready.wait()
    print(f"run {cfg.name}: catalog ready", flush=True)

    model = build_model(cfg.catalog.embedding_dim + 5, cfg.train.hidden, cfg.train.depth, cfg.catalog.species)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.train.lr, weight_decay=cfg.train.weight_decay)
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.05)
    step = 0
    last = time.perf_counter()
    while True:
        x, y = loader.out.get()
        logits = model(x)
        loss = loss_fn(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        now = time.perf_counter()
        acc = (logits.argmax(1) == y).float().mean().item()
        print(f"step {step} loss {loss.item():.4f} acc {acc:.3f} n {len(y)} dt {1000 * (now - last):.1f}ms", flush=True)
        last = now


if __name__ == "__main__":
    main()
