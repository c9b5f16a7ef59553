import argparse
import time

import runcfg


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/field_season.toml")
    args = ap.parse_args()
    cfg = runcfg.load(args.config)

    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    from mining import NegativeMiner

    def tower(d_in, hidden, d_out):
        return nn.Sequential(nn.Linear(d_in, hidden), nn.LayerNorm(hidden), nn.GELU(),
                             nn.Linear(hidden, hidden), nn.LayerNorm(hidden), nn.GELU(),
                             nn.Linear(hidden, d_out))

    torch.set_num_threads(cfg.train.threads)
    torch.manual_seed(cfg.train.seed)
    miner = NegativeMiner(cfg, cfg.train.seed + 31)
    miner.start()
    while not miner.ready.wait(0.5):
        if not miner.is_alive():
            raise SystemExit("miner thread died during start-up")
    print(f"{cfg.name}: catalogue of {cfg.catalogue.references} reference sightings indexed", flush=True)

    t, d = cfg.train, cfg.catalogue.feature_dim
    q_tower, i_tower = tower(d, t.hidden, t.embed), tower(d, t.hidden, t.embed)
    opt = torch.optim.AdamW(list(q_tower.parameters()) + list(i_tower.parameters()), lr=t.lr)
    step = 0
    last = time.perf_counter()
    while True:
        q, items = miner.out.get()
        b, k, _ = items.shape
        zq = F.normalize(q_tower(q), dim=-1)
        zi = F.normalize(i_tower(items.reshape(b * k, d)), dim=-1).reshape(b, k, -1)
        logits = torch.einsum("bd,bkd->bk", zq, zi) / t.temperature
        loss = F.cross_entropy(logits, torch.zeros(b, dtype=torch.long))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        now = time.perf_counter()
        top1 = (logits.argmax(1) == 0).float().mean().item()
        print(f"step {step} loss {loss.item():.4f} top1 {top1:.3f} dt {1000 * (now - last):.1f}ms", flush=True)
        last = now


if __name__ == "__main__":
    main()
