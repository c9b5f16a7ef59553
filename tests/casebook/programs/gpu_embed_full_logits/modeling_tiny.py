"""A decoder-only LM in the usual hub layout: a body (``TinyModel``) and a causal-LM wrapper with the vocabulary
head (``TinyForCausalLM``) whose forward returns logits and, on request, the hidden states."""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class TinyConfig:
    vocab_size: int = 128_256
    hidden_size: int = 2048
    intermediate_size: int = 5632
    num_layers: int = 4


@dataclass
class CausalLMOutput:
    logits: torch.Tensor
    hidden_states: tuple[torch.Tensor, ...] | None = None


class GatedMLP(nn.Module):
    def __init__(self, cfg: TinyConfig) -> None:
        super().__init__()
        self.norm = nn.RMSNorm(cfg.hidden_size)
        self.gate_up = nn.Linear(cfg.hidden_size, 2 * cfg.intermediate_size, bias=False)
        self.down = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up(self.norm(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)


class TinyModel(nn.Module):
    def __init__(self, cfg: TinyConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(GatedMLP(cfg) for _ in range(cfg.num_layers))
        self.norm = nn.RMSNorm(cfg.hidden_size)

    def forward(self, input_ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
        h = self.embed_tokens(input_ids)
        states = [h]
        for layer in self.layers:
            h = layer(h)
            states.append(h)
        states[-1] = self.norm(h)
        return tuple(states)


class TinyForCausalLM(nn.Module):
    def __init__(self, cfg: TinyConfig) -> None:
        super().__init__()
        self.config = cfg
        self.model = TinyModel(cfg)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)

    def forward(self, input_ids: torch.Tensor, output_hidden_states: bool = False,
                logits_to_keep: int = 0) -> CausalLMOutput:
        states = self.model(input_ids)
        h = states[-1] if logits_to_keep == 0 else states[-1][:, -logits_to_keep:]
        logits = self.lm_head(h)
        return CausalLMOutput(logits=logits, hidden_states=states if output_hidden_states else None)
