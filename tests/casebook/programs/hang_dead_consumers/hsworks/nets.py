import torch
from torch import nn


class Teacher(nn.Module):
    def __init__(self, width: int = 96) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(width, 256), nn.GELU(), nn.Linear(256, width))

    @torch.no_grad()
    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


class Student(nn.Module):
    def __init__(self, width: int = 96) -> None:
        super().__init__()
        self.proj = nn.Linear(width, 128)
        self.head = nn.Linear(128, width)

    def forward(self, feats: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.proj(feats)))
