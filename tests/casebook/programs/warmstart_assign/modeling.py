"""A small bag-of-embeddings intent classifier (the "pretrained" checkpoint is one of these)."""
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class IntentConfig:
    vocab_size: int = 2000
    hidden_size: int = 128
    num_intents: int = 12
    dropout: float = 0.1


class IntentClassifier(nn.Module):
    def __init__(self, config: IntentConfig):
        super().__init__()
        self.config = config
        self.embeddings = nn.EmbeddingBag(config.vocab_size, config.hidden_size, mode="mean")
        self.pre_classifier = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = nn.Dropout(config.dropout)
        self.classifier = nn.Linear(config.hidden_size, config.num_intents)

    def forward(self, input_ids, offsets):
        pooled = self.embeddings(input_ids, offsets)
        hidden = torch.tanh(self.pre_classifier(pooled))
        return self.classifier(self.dropout(hidden))
