"""ReZero residual blocks (Bachlechner et al. 2020): x + alpha * F(x), alpha initialised at 0."""
import torch
from torch import nn


class ReZeroMLP(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc_in = nn.Linear(dim, hidden)
        self.fc_out = nn.Linear(hidden, dim)
        self.act = nn.GELU()
        # residual gate starts closed; it is saved with the model so that eval matches training
        self.register_buffer("alpha", torch.zeros(1))

    def forward(self, x):
        return x + self.alpha * self.fc_out(self.act(self.fc_in(x)))


class ReZeroStack(nn.Module):
    def __init__(self, vocab, dim=128, depth=4):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.Sequential(*[ReZeroMLP(dim, 4 * dim) for _ in range(depth)])
        self.unembed = nn.Linear(dim, vocab, bias=False)

    def forward(self, ids):
        return self.unembed(self.layers(self.embed(ids)))
