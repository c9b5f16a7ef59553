"""Shared pieces of the click-through ranker: the model and the impression stream."""
import torch
from torch import nn

CANDIDATES = 512


class Ranker(nn.Module):
    def __init__(self, n_items, dim, hidden):
        super().__init__()
        self.items = nn.Embedding(n_items, dim)
        self.user = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                  nn.Linear(hidden, dim))

    def forward(self, history, candidates):
        u = self.user(self.items(history).mean(1))            # [B, dim]
        return torch.einsum("bd,bcd->bc", u, self.items(candidates))  # [B, C] scores


def impressions(out, n_items, batch, device):
    g = torch.Generator(device=device).manual_seed(0)
    while True:
        history = torch.randint(0, n_items, (batch, 50), device=device, generator=g)
        candidates = torch.randint(0, n_items, (batch, CANDIDATES), device=device, generator=g)
        clicks = (torch.rand(batch, CANDIDATES, device=device, generator=g) < 0.03).float()
        out.put((history, candidates, clicks))
