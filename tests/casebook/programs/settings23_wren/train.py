import argparse
import time

import numpy as np

import options


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/bench_notes.toml")
    args = ap.parse_args()
    opts = options.load(args.config)

    import torch
    import torch.nn as nn

    from feed import RecordFeed
    from lexicon import Lexicon
    from subwords import build_tokenizer, train_vocabulary

    torch.set_num_threads(opts.train.threads)
    torch.manual_seed(opts.train.seed)
    lex = Lexicon(opts.lexicon)
    lines = lex.corpus(np.random.default_rng(opts.lexicon.seed + 1), opts.tokenizer.training_lines, 40)
    vocab, merges = train_vocabulary(lines, opts.tokenizer)
    tok, pad_id = build_tokenizer(vocab, merges, opts.tokenizer)
    print(f"{opts.name}: vocabulary {len(vocab)} tokens, {len(merges)} merges", flush=True)

    class YieldModel(nn.Module):
        def __init__(self, vocab_size, dim, hidden, classes):
            super().__init__()
            self.bag = nn.EmbeddingBag(vocab_size, dim, mode="mean", padding_idx=pad_id)
            self.peak = nn.EmbeddingBag(vocab_size, dim, mode="max", padding_idx=pad_id)
            self.mlp = nn.Sequential(nn.Linear(2 * dim + 1, hidden), nn.GELU(), nn.Linear(hidden, hidden),
                                     nn.GELU(), nn.Linear(hidden, classes))

        def forward(self, ids, mask):
            length = mask.sum(1, keepdim=True) / mask.shape[1]
            return self.mlp(torch.cat([self.bag(ids), self.peak(ids), length], dim=1))

    model = YieldModel(len(vocab), opts.train.embed_dim, opts.train.hidden, opts.train.classes)
    opt = torch.optim.Adam(model.parameters(), lr=opts.train.lr)
    loss_fn = nn.CrossEntropyLoss()
    feed = RecordFeed(lex, tok, opts.feed, opts.train.classes, opts.train.seed + 5)
    feed.start()
    step = 0
    last = time.perf_counter()
    while True:
        ids, mask, y = feed.out.get()
        logits = model(ids, mask)
        loss = loss_fn(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        now = time.perf_counter()
        print(f"step {step} loss {loss.item():.4f} tokens {ids.shape[1]} dt {1000 * (now - last):.1f}ms", flush=True)
        last = now


if __name__ == "__main__":
    main()
