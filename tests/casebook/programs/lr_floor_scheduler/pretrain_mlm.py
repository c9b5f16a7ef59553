"""Masked-token pretraining of a tiny encoder.

usage: python pretrain_mlm.py [--epochs N]
"""
import argparse
import time

import torch
import torch.nn as nn

from lr_schedules import warmup_poly_decay

MASK_ID, VOCAB = 1, 320


class MiniEncoder(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, d)
        self.layer = nn.TransformerEncoderLayer(d, 4, 128, dropout=0.0, batch_first=True)
        self.lm_head = nn.Linear(d, VOCAB)

    def forward(self, ids):
        return self.lm_head(self.layer(self.emb(ids)))


def mask_tokens(ids, p=0.15):
    labels = ids.clone()
    chosen = torch.rand(ids.shape) < p
    labels[~chosen] = -100
    ids = ids.masked_fill(chosen, MASK_ID)
    return ids, labels


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--lr", type=float, default=5e-4)
    args = ap.parse_args()
    torch.set_num_threads(1)
    model = MiniEncoder()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    sched = warmup_poly_decay(opt, warmup_steps=args.warmup, total_steps=args.epochs)
    crit = nn.CrossEntropyLoss(ignore_index=-100)
    gstep = 0
    for epoch in range(args.epochs):
        t0 = time.time()
        for _ in range(100_000):  # a long streaming epoch
            ids = torch.randint(2, VOCAB, (16, 32))
            inputs, labels = mask_tokens(ids)
            logits = model(inputs)
            loss = crit(logits.view(-1, VOCAB), labels.view(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            gstep += 1
            time.sleep(0.006)
            if gstep % 50 == 0:
                print(f"epoch {epoch} step {gstep} loss {loss.item():.3f} lr {sched.get_last_lr()[0]:.2e} "
                      f"({gstep / (time.time() - t0):.0f} steps/s)", flush=True)


if __name__ == "__main__":
    main()
