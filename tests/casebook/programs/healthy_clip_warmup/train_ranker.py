"""Pairwise learning-to-rank with a linear warm-up from lr 0, cosine decay and gradient clipping."""
import math
import time

import torch
from torch import nn

FEATS = 48
WARMUP, TOTAL = 150, 50_000


def lr_lambda(step):
    if step < WARMUP:
        return step / WARMUP  # starts at exactly 0
    return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - WARMUP) / (TOTAL - WARMUP))))


class Scorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(FEATS, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, x):
        return self.mlp(x).squeeze(-1)


def pairs(n=64):
    w = torch.linspace(-1, 1, FEATS)
    while True:
        a, b = torch.randn(n, FEATS), torch.randn(n, FEATS)
        yield a, b, ((a - b) @ w > 0).float()


if __name__ == "__main__":
    torch.set_num_threads(1)
    scorer = Scorer()
    opt = torch.optim.AdamW(scorer.parameters(), lr=1e-3, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)
    clipped = 0
    for step, (a, b, pref) in enumerate(pairs(), start=1):
        margin = scorer(a) - scorer(b)
        loss = nn.functional.binary_cross_entropy_with_logits(margin, pref)
        opt.zero_grad()
        loss.backward()
        norm = nn.utils.clip_grad_norm_(scorer.parameters(), max_norm=0.05)  # tight: clips nearly every step
        clipped += int(norm > 0.05)
        opt.step()
        sched.step()
        time.sleep(0.01)
        if step % 50 == 0:
            print(f"step {step:6d} loss {loss.item():.4f} lr {sched.get_last_lr()[0]:.2e} clipped {clipped}/{step}",
                  flush=True)
