"""A gated linear recurrence, written the readable way (one token at a time)."""
import torch
from torch import nn


class ScanEncoder(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.gate = nn.Linear(d, d)
        self.inp = nn.Linear(d, d)

    @torch.no_grad()
    def scan_tokens(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, d = x.shape
        state = torch.zeros(batch, d)
        outs = []
        for t in range(length):
            g = torch.sigmoid(self.gate(x[:, t]))
            state = g * state + (1 - g) * torch.tanh(self.inp(x[:, t]))
            outs.append(state)
        return torch.stack(outs, dim=1)
