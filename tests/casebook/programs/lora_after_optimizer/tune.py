"""LoRA-tune a tiny attention classifier on synthetic sequences.

Config is a dict at the top, as in many notebooks turned scripts.
"""
import time

import torch
from torch import nn
import torch.nn.functional as F

from minilora import inject_lora, trainable_summary

CFG = dict(dim=96, heads=4, seq=24, vocab=500, classes=4, batch=24, lr=2e-3, wd=0.01, lora_r=8, log_every=20)


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.ff1, self.ff2 = nn.Linear(d, 2 * d), nn.Linear(2 * d, d)
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)

    def forward(self, x):
        b, t, d = x.shape
        y = self.n1(x)
        q, k, v = (f(y).view(b, t, self.h, -1).transpose(1, 2) for f in (self.q, self.k, self.v))
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, d)
        x = x + self.o(a)
        return x + self.ff2(F.gelu(self.ff1(self.n2(x))))


class Classifier(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.tok = nn.Embedding(c["vocab"], c["dim"])
        self.blocks = nn.ModuleList(Block(c["dim"], c["heads"]) for _ in range(2))
        self.cls = nn.Linear(c["dim"], c["classes"])

    def forward(self, ids):
        x = self.tok(ids)
        for blk in self.blocks:
            x = blk(x)
        return self.cls(x.mean(1))


def main():
    torch.set_num_threads(1)
    torch.manual_seed(3)
    model = Classifier(CFG)
    # (pretend the base was pre-trained)
    optimizer = torch.optim.AdamW(model.parameters(), lr=CFG["lr"], weight_decay=CFG["wd"])
    model = inject_lora(model, r=CFG["lora_r"])
    print(trainable_summary(model), flush=True)
    step = 0
    t0 = time.time()
    while True:
        ids = torch.randint(0, CFG["vocab"], (CFG["batch"], CFG["seq"]))
        labels = ids[:, 0] % CFG["classes"]
        logits = model(ids)
        loss = F.cross_entropy(logits, labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        step += 1
        time.sleep(0.008)
        if step % CFG["log_every"] == 0:
            print(f"{time.time() - t0:7.1f}s  step {step:5d}  loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
