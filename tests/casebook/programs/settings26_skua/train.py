import argparse
import time

import skuacfg


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/colony_watch.toml")
    args = ap.parse_args()
    cfg = skuacfg.load(args.config)

    import torch
    import torch.nn as nn

    from tagger import NoteTagger

    torch.set_num_threads(cfg.train.threads)
    torch.manual_seed(cfg.train.seed)
    tagger = NoteTagger(cfg, cfg.train.seed + 13)
    tagger.start()
    while not tagger.ready.wait(0.5):
        if not tagger.is_alive():
            raise SystemExit("note tagger died during start-up")
    print(f"{cfg.name}: notebook of {cfg.colony.notes} field notes loaded", flush=True)

    tr = cfg.train
    bag = nn.EmbeddingBag(cfg.tagger.hash_buckets, tr.embed, mode="mean")
    head = nn.Sequential(nn.Linear(tr.embed, tr.hidden), nn.LayerNorm(tr.hidden), nn.GELU(),
                         nn.Linear(tr.hidden, tr.hidden), nn.LayerNorm(tr.hidden), nn.GELU(),
                         nn.Linear(tr.hidden, cfg.colony.behaviours))
    opt = torch.optim.AdamW(list(bag.parameters()) + list(head.parameters()), lr=tr.lr)
    loss_fn = nn.CrossEntropyLoss()
    step = 0
    last = time.perf_counter()
    while True:
        ids, offsets, y = tagger.out.get()
        loss = loss_fn(head(bag(ids, offsets)), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        now = time.perf_counter()
        print(f"step {step} loss {loss.item():.4f} n {len(y)} dt {1000 * (now - last):.1f}ms", flush=True)
        last = now


if __name__ == "__main__":
    main()
