import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, c_in, c_out, stride):
        super().__init__()
        self.conv = nn.Conv1d(c_in, c_out, 5, stride=stride, padding=2)
        self.norm = nn.GroupNorm(8, c_out)

    def forward(self, x):
        return F.gelu(self.norm(self.conv(x)))


class TrackEncoder(nn.Module):
    """Conv1d over time with mel bins as channels, attentive-free mean+max pooling, projection head."""

    def __init__(self, n_mels, width=96, dim=128):
        super().__init__()
        self.blocks = nn.Sequential(Block(n_mels, width, 2), Block(width, width, 2), Block(width, 2 * width, 2))
        self.embed = nn.Linear(4 * width, dim)
        self.head = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, dim))

    def forward(self, x):
        h = self.blocks(x)
        z = self.embed(torch.cat([h.mean(-1), h.amax(-1)], 1))
        return z, self.head(z)


def nt_xent(a, b, temperature=0.1):
    a, b = F.normalize(a, dim=1), F.normalize(b, dim=1)
    logits = a @ b.t() / temperature
    target = torch.arange(a.shape[0])
    return 0.5 * (F.cross_entropy(logits, target) + F.cross_entropy(logits.t(), target))
