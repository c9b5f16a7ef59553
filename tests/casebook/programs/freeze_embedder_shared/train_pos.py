"""Train the conv POS tagger on a synthetic treebank.

    python train_pos.py [--epochs N] [--freeze-vectors/--no-freeze-vectors]

Modelled on facebookresearch/fairseq#4702 and CarperAI/trlx#543: a "freeze the pretrained embeddings" step
that freezes a whole sub-module. Here ``model.embedder.requires_grad_(False)`` freezes the word table as
intended, and with it the freshly initialised ``embedder.proj`` projection that every position goes through:
it stays at its random initialisation for the whole run (the optimizer, built over all parameters, skips it
because it never gets a gradient) while the conv layers and the output layer train.
"""
import argparse
import time

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from tagger import ConvTagger

VOCAB, N_TAGS, SEQ = 3000, 17, 24


def make_treebank(n_sentences, seed=0):
    """Each word has a most-likely tag; the tag of a token also depends on the previous word's tag."""
    g = torch.Generator().manual_seed(seed)
    word_tag = torch.randint(0, N_TAGS, (VOCAB,), generator=g)
    words = torch.randint(1, VOCAB, (n_sentences, SEQ), generator=g)
    tags = word_tag[words]
    shifted = torch.roll(tags, 1, dims=1)
    flip = (shifted % 4 == 0) & (torch.rand(n_sentences, SEQ, generator=g) < 0.5)
    tags = torch.where(flip, (tags + 1) % N_TAGS, tags)
    return TensorDataset(words, tags)


def pretrained_vectors(seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(VOCAB, 64, generator=g) * 0.5


def checksum(module):
    return sum(p.detach().double().abs().sum().item() for p in module.parameters())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=100000)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--freeze-vectors", action=argparse.BooleanOptionalAction, default=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)

    data = make_treebank(4096)
    loader = DataLoader(data, batch_size=args.batch_size, shuffle=True, drop_last=True)
    model = ConvTagger(VOCAB, 64, 96, N_TAGS, pretrained=pretrained_vectors())
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

    if args.freeze_vectors:
        # keep the pretrained vectors fixed
        model.embedder.requires_grad_(False)
    n_train = sum(p.numel() for p in model.parameters() if p.requires_grad)
    print(f"trainable params: {n_train} / {sum(p.numel() for p in model.parameters())}", flush=True)

    step, t0 = 0, time.time()
    for epoch in range(args.epochs):
        for words, tags in loader:
            scores = model(words)
            loss = F.cross_entropy(scores.reshape(-1, N_TAGS), tags.reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step % 50 == 0:
                acc = (scores.argmax(-1) == tags).float().mean().item()
                print(f"epoch {epoch} step {step} loss {loss.item():.4f} acc {acc:.3f} "
                      f"proj {checksum(model.embedder.proj):.6f} conv1 {checksum(model.conv1):.6f} "
                      f"({step / (time.time() - t0):.0f} it/s)", flush=True)


if __name__ == "__main__":
    main()
