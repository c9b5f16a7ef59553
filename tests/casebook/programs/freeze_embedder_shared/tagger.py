"""Part-of-speech tagger: pretrained word vectors -> projection -> conv encoder -> per-token tag scores.

The word vectors come from a pretrained table (64-d) and are frozen; ``WordEmbedder.proj`` maps them to the
model width and is new: it is meant to be learned with the rest of the model.
"""
import torch
import torch.nn as nn


class WordEmbedder(nn.Module):
    def __init__(self, vocab, vec_dim, width, pretrained=None):
        super().__init__()
        self.vectors = nn.Embedding(vocab, vec_dim, padding_idx=0)
        if pretrained is not None:
            self.vectors.weight.data.copy_(pretrained)
        self.proj = nn.Linear(vec_dim, width)  # shared by every position, trained from scratch
        self.norm = nn.LayerNorm(width)

    def forward(self, tokens):
        return self.norm(self.proj(self.vectors(tokens)))


class ConvTagger(nn.Module):
    def __init__(self, vocab=3000, vec_dim=64, width=96, n_tags=17, pretrained=None):
        super().__init__()
        self.embedder = WordEmbedder(vocab, vec_dim, width, pretrained)
        self.conv1 = nn.Conv1d(width, width, kernel_size=3, padding=1)
        self.conv2 = nn.Conv1d(width, width, kernel_size=3, padding=1)
        self.out = nn.Linear(width, n_tags)

    def forward(self, tokens):
        h = self.embedder(tokens).transpose(1, 2)  # B, C, T
        h = torch.relu(self.conv1(h))
        h = h + torch.relu(self.conv2(h))
        return self.out(h.transpose(1, 2))
