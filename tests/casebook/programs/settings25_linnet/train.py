import argparse
import time

import songcfg


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/chorus_review.toml")
    args = ap.parse_args()
    cfg = songcfg.load(args.config)

    import torch
    import torch.nn as nn

    from augment import SongAugmenter
    from songs import SPECIAL

    class SongStudent(nn.Module):
        def __init__(self, vocab, width, layers, classes, max_len):
            super().__init__()
            self.emb = nn.Embedding(vocab, width, padding_idx=0)
            self.pos = nn.Parameter(torch.zeros(1, max_len, width))
            layer = nn.TransformerEncoderLayer(width, 4, 4 * width, dropout=0.1, batch_first=True)
            self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            self.head = nn.Linear(width, classes)

        def forward(self, x):
            h = self.enc(self.emb(x) + self.pos[:, :x.shape[1]])
            return self.head(h.mean(1))

    torch.set_num_threads(cfg.train.threads)
    torch.manual_seed(cfg.train.seed)
    aug = SongAugmenter(cfg, cfg.train.seed + 17)
    aug.start()
    while not aug.ready.wait(0.5):
        if not aug.is_alive():
            raise SystemExit("aug thread died during start-up")
    print(f"{cfg.name}: teacher ready ({cfg.teacher.layers} layers, width {cfg.teacher.width})", flush=True)

    c = cfg.corpus
    model = SongStudent(c.syllables + SPECIAL, cfg.train.width, cfg.train.layers, c.song_types,
                        c.prompt_len + cfg.teacher.new_syllables)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.train.lr)
    loss_fn = nn.CrossEntropyLoss()
    step = 0
    last = time.perf_counter()
    while True:
        x, y = aug.out.get()
        logits = model(x)
        loss = loss_fn(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        now = time.perf_counter()
        acc = (logits.argmax(1) == y).float().mean().item()
        print(f"step {step} loss {loss.item():.4f} acc {acc:.3f} dt {1000 * (now - last):.1f}ms", flush=True)
        last = now


if __name__ == "__main__":
    main()
