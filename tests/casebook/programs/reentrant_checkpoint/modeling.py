"""Decoder stack in the Hugging Face style: layers take their tensors as keyword arguments."""
from functools import partial

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


class DecoderLayer(nn.Module):
    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(hidden_size)
        self.mlp = nn.Sequential(nn.Linear(hidden_size, 4 * hidden_size), nn.GELU(), nn.Linear(4 * hidden_size, hidden_size))

    def forward(self, *, hidden_states: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        return hidden_states + self.mlp(self.norm(hidden_states + context))


class DraftModel(nn.Module):
    def __init__(self, hidden_size: int = 128, num_layers: int = 4, vocab_size: int = 1000) -> None:
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(hidden_size) for _ in range(num_layers))
        self.lm_head = nn.Linear(hidden_size, vocab_size)
        self.gradient_checkpointing = True

    def forward(self, context: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        hidden_states = noise
        for layer in self.layers:
            if self.gradient_checkpointing and self.training:
                # as transformers' GradientCheckpointingLayer does: bind the keyword arguments, checkpoint the call
                hidden_states = checkpoint(partial(layer.__call__, hidden_states=hidden_states, context=context),
                                           use_reentrant=True)
            else:
                hidden_states = layer(hidden_states=hidden_states, context=context)
        return self.lm_head(hidden_states)
