import argparse
import time

import settings


def build_model(nn, in_dim, hidden, depth, classes):
    layers, d = [], in_dim
    for _ in range(depth):
        layers += [nn.Linear(d, hidden), nn.LayerNorm(hidden), nn.SiLU()]
        d = hidden
    layers.append(nn.Linear(d, classes))
    return nn.Sequential(*layers)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/coastal_replay.toml")
    args = ap.parse_args()
    cfg = settings.load(args.config)

    import torch
    import torch.nn as nn

    from loader import ScanLoader

    torch.set_num_threads(cfg.runtime.torch_threads)
    torch.manual_seed(cfg.train.seed)
    loader = ScanLoader(cfg, cfg.train.seed + 23)
    loader.start()
    loader.ready.wait()
    print(f"{cfg.name}: archive ready, {loader.feature_dim} features per sector", flush=True)

    model = build_model(nn, loader.feature_dim, cfg.train.hidden, cfg.train.depth, cfg.archive.classes)
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
        print(f"step {step} loss {loss.item():.4f} n {len(y)} dt {1000 * (now - last):.1f}ms", flush=True)
        last = now


if __name__ == "__main__":
    main()
