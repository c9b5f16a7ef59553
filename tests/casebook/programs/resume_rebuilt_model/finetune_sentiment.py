#!/usr/bin/env python
"""Fine-tune a bag-of-embeddings sentiment classifier, warm-started from a 'pretrained' snapshot."""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from warmstart import load_pretrained, save_pretrained

VOCAB = 2000


class SentimentNet(nn.Module):
    def __init__(self, dim: int = 64, classes: int = 3):
        super().__init__()
        self.embed = nn.EmbeddingBag(VOCAB, dim, mode="mean")
        self.mlp = nn.Sequential(nn.Linear(dim, 128), nn.Tanh(), nn.Linear(128, classes))

    def forward(self, tokens, offsets):
        return self.mlp(self.embed(tokens, offsets))


def fake_batch(batch: int = 32):
    lengths = torch.randint(5, 40, (batch,))
    tokens = torch.randint(0, VOCAB, (int(lengths.sum()),))
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)[:-1]])
    labels = (tokens[offsets] % 3)  # the first token decides: learnable
    return tokens, offsets, labels


def build_training_objects(model, lr):
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, nesterov=True)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10_000, gamma=0.5)
    return optimizer, scheduler


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--log-every", type=int, default=25)
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(7)

    model = SentimentNet()
    optimizer, scheduler = build_training_objects(model, args.lr)
    # warm start: the "pretrained" weights come back through a snapshot on disk
    ckpt = save_pretrained(model, "sentiment")
    model = load_pretrained(SentimentNet, ckpt)
    model.train()

    step, t0 = 0, time.time()
    while True:
        tokens, offsets, labels = fake_batch()
        time.sleep(0.01)  # tokenizer / reader time
        logits = model(tokens, offsets)
        loss = F.cross_entropy(logits, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        step += 1
        if step % args.log_every == 0:
            acc = (logits.argmax(-1) == labels).float().mean().item()
            print(f"[finetune] step {step} loss {loss.item():.4f} acc {acc:.2f} "
                  f"{step / (time.time() - t0):.1f} it/s", flush=True)


if __name__ == "__main__":
    main()
