"""A top-1 mixture-of-experts feed-forward layer with two dispatch implementations.

``gather``: the textbook loop: per expert, the tokens routed to it are found with torch.nonzero and gathered with
a boolean mask; a capacity overflow is reported when ``(load > capacity).any()``. Every nonzero, mask index and
``if tensor.any()`` needs the device's answer on the host (pytorch/pytorch#12461, #131256).

``static``: capacity-padded dispatch with fixed shapes (one-hot cumsum gives each token its slot; tokens past
capacity go to a scratch slot): no host round trip.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class MoEFeedForward(nn.Module):
    def __init__(self, width: int, hidden: int, experts: int, capacity_factor: float = 1.25,
                 dispatch: str = "gather") -> None:
        super().__init__()
        self.experts, self.capacity_factor, self.dispatch = experts, capacity_factor, dispatch
        self.router = nn.Linear(width, experts, bias=False)
        self.w_in = nn.Parameter(torch.randn(experts, width, hidden) / width ** 0.5)
        self.w_out = nn.Parameter(torch.randn(experts, hidden, width) / hidden ** 0.5)
        self.overflow_events = 0
        self.dropped = None  # tokens dropped for capacity, on the device (static dispatch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        gate = F.softmax(self.router(flat), dim=-1)
        weight, expert = gate.max(dim=-1)
        capacity = int(self.capacity_factor * flat.shape[0] / self.experts)
        if self.dispatch == "gather":
            out = self._gather(flat, expert, capacity)
        else:
            out = self._static(flat, expert, capacity)
        return (out * weight[:, None]).reshape(shape)

    def _gather(self, flat: torch.Tensor, expert: torch.Tensor, capacity: int) -> torch.Tensor:
        load = torch.bincount(expert, minlength=self.experts)
        if (load > capacity).any():
            self.overflow_events += 1
        out = torch.zeros_like(flat)
        for e in range(self.experts):
            idx = torch.nonzero(expert == e).squeeze(1)
            if idx.numel() == 0:
                continue
            idx = idx[:capacity]
            h = F.gelu(flat[idx] @ self.w_in[e])
            out[idx] = (h @ self.w_out[e]).to(out.dtype)
        return out

    def _static(self, flat: torch.Tensor, expert: torch.Tensor, capacity: int) -> torch.Tensor:
        onehot = F.one_hot(expert, self.experts)
        slot = ((onehot.cumsum(0) - 1) * onehot).sum(-1)
        keep = slot < capacity
        slot = torch.where(keep, slot, torch.full_like(slot, capacity))
        dropped = (~keep).sum()
        self.dropped = dropped if self.dropped is None else self.dropped + dropped
        buf = flat.new_zeros(self.experts, capacity + 1, flat.shape[-1])
        buf = buf.index_put((expert, slot), flat)
        h = torch.bmm(F.gelu(torch.bmm(buf[:, :capacity], self.w_in)), self.w_out)
        h = torch.cat([h, h.new_zeros(self.experts, 1, h.shape[-1])], dim=1)
        return h[expert, slot]


class MoEBlock(nn.Module):
    def __init__(self, width: int, hidden: int, experts: int, dispatch: str) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.mix = nn.Linear(width, width)
        self.norm2 = nn.LayerNorm(width)
        self.ffn = MoEFeedForward(width, hidden, experts, dispatch=dispatch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.mix(self.norm(x))
        return x + self.ffn(self.norm2(x))
