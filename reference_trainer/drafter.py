"""The DFlash block-diffusion draft model, state-dict compatible with the official ``dflash`` package.

Why our own class: the official wheel (``dflash==0.1.0``) pins datasets/tqdm/requests that a trainer does
not need, and its layers are called with keyword arguments only (the HF ``GradientCheckpointingLayer``
style that silently loses every gradient under ``use_reentrant=True``). Parameter names and shapes are
identical (``layers.N.self_attn.{q,k,v,o}_proj``, ``q_norm``, ``k_norm``, ``mlp.{gate,up,down}_proj``,
``input_layernorm``, ``post_attention_layernorm``, ``norm``, ``fc``, ``hidden_norm``);
``tests/trainer/test_models.py`` loads our weights into ``dflash.model.DFlashDraftModel`` with
``strict=True`` and compares outputs.

The architecture, per draft layer: Q comes from the block tokens only; K and V come from the fused
target context (``hidden_norm(fc(concat of tapped target layers))``) *and* the block tokens ("KV
injection"); attention is non-causal and shaped by the block mask (``reference_trainer.loss``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from reference_trainer.target import build_target_layer_ids


@dataclass(frozen=True, kw_only=True)
class DrafterConfig:
    """Shapes of a DFlash drafter; the defaults are the published Qwen3.5-4B DFlash drafter's."""

    hidden_size: int = 2560
    num_hidden_layers: int = 5
    num_attention_heads: int = 32
    num_key_value_heads: int = 8
    head_dim: int = 128
    intermediate_size: int = 9728
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10_000_000.0
    num_target_layers: int = 32  # of the *target*: decides which layers are tapped
    block_size: int = 16
    mask_token_id: int = 248_070
    vocab_size: int = 248_320

    def __post_init__(self) -> None:
        if self.num_hidden_layers < 1:
            raise ValueError("drafter needs at least one layer")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError("drafter num_attention_heads must be a multiple of num_key_value_heads")
        if not 0 <= self.mask_token_id < self.vocab_size:
            raise ValueError(f"mask_token_id {self.mask_token_id} outside the vocab [0, {self.vocab_size})")

    @property
    def target_layer_ids(self) -> list[int]:
        return build_target_layer_ids(self.num_target_layers, self.num_hidden_layers)

    def official_config_dict(self) -> dict[str, Any]:
        """The config the official ``dflash.model.DFlashDraftModel`` (a ``Qwen3Config``) is built from."""
        return {
            "architectures": ["DFlashDraftModel"],
            "model_type": "qwen3",
            "hidden_size": self.hidden_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.head_dim,
            "intermediate_size": self.intermediate_size,
            "rms_norm_eps": self.rms_norm_eps,
            "rope_theta": self.rope_theta,
            "rope_parameters": {"rope_theta": self.rope_theta, "rope_type": "default"},
            "vocab_size": self.vocab_size,
            "attention_bias": False,
            "hidden_act": "silu",
            "tie_word_embeddings": False,
            "num_target_layers": self.num_target_layers,
            "block_size": self.block_size,
            "dflash_config": {"mask_token_id": self.mask_token_id, "target_layer_ids": self.target_layer_ids,
                              "block_size": self.block_size},
        }


class RMSNorm(nn.Module):
    """Qwen3's RMSNorm: normalise in fp32, scale in the input dtype."""

    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Rotary(nn.Module):
    def __init__(self, head_dim: int, theta: float) -> None:
        super().__init__()
        inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float) / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)  # not in the state dict (as upstream)

    def forward(self, position_ids: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        freqs = position_ids[..., None].float() * self.inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype), emb.sin().to(dtype)


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Any, scale: float,
           flex: Any = None) -> torch.Tensor:
    """Non-causal attention under the block mask: flex_attention with a BlockMask, else dense-mask SDPA."""
    if flex is not None:
        return flex(q, k, v, block_mask=mask, scale=scale, enable_gqa=True)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=True)


class DFlashAttention(nn.Module):
    def __init__(self, config: DrafterConfig) -> None:
        super().__init__()
        h, d = config.hidden_size, config.head_dim
        self.head_dim = d
        self.q_proj = nn.Linear(h, config.num_attention_heads * d, bias=False)
        self.k_proj = nn.Linear(h, config.num_key_value_heads * d, bias=False)
        self.v_proj = nn.Linear(h, config.num_key_value_heads * d, bias=False)
        self.o_proj = nn.Linear(config.num_attention_heads * d, h, bias=False)
        self.q_norm = RMSNorm(d, config.rms_norm_eps)
        self.k_norm = RMSNorm(d, config.rms_norm_eps)

    def forward(self, hidden: torch.Tensor, context: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                mask: Any, flex: Any = None) -> torch.Tensor:
        batch, q_len, _ = hidden.shape
        kv_len = context.shape[1] + q_len
        q = self.q_norm(self.q_proj(hidden).view(batch, q_len, -1, self.head_dim)).transpose(1, 2)
        # KV injection: the target context and the block tokens share one key/value sequence.
        k = torch.cat([self.k_proj(context), self.k_proj(hidden)], dim=1).view(batch, kv_len, -1, self.head_dim)
        v = torch.cat([self.v_proj(context), self.v_proj(hidden)], dim=1).view(batch, kv_len, -1, self.head_dim)
        k = self.k_norm(k).transpose(1, 2)
        v = v.transpose(1, 2)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q = q * cos[..., -q_len:, :] + rotate_half(q) * sin[..., -q_len:, :]
        k = k * cos + rotate_half(k) * sin
        # RMSNorm's fp32 weight promotes q/k to fp32 under autocast; flex_attention (not autocast-aware)
        # needs one dtype for q, k and v.
        out = attend(q.to(v.dtype), k.to(v.dtype), v, mask, self.head_dim**-0.5, flex)
        return self.o_proj(out.transpose(1, 2).reshape(batch, q_len, -1))


class MLP(nn.Module):
    def __init__(self, config: DrafterConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DFlashDecoderLayer(nn.Module):
    def __init__(self, config: DrafterConfig) -> None:
        super().__init__()
        self.self_attn = DFlashAttention(config)
        self.mlp = MLP(config)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(self, hidden_states: torch.Tensor, target_hidden: torch.Tensor, cos: torch.Tensor,
                sin: torch.Tensor, mask: Any = None, flex: Any = None) -> torch.Tensor:
        hidden_states = hidden_states + self.self_attn(self.input_layernorm(hidden_states), target_hidden,
                                                       cos, sin, mask, flex)
        return hidden_states + self.mlp(self.post_attention_layernorm(hidden_states))


@dataclass(frozen=True)
class CheckpointMode:
    """How draft layers are activation-checkpointed.

    ``keyword_calls=True`` calls ``checkpoint(partial(layer, **tensors))`` the way HF's
    ``GradientCheckpointingLayer`` does. Combined with ``use_reentrant=True`` the reentrant function sees
    no tensor inputs, runs the layer under no_grad, and every layer parameter silently keeps grad=None
    (the seed incident). We pass tensors positionally by default, which is correct in both modes.
    """

    enabled: bool = True
    use_reentrant: bool = False
    keyword_calls: bool = False


class DFlashDraftModel(nn.Module):
    def __init__(self, config: DrafterConfig) -> None:
        super().__init__()
        self.config = config
        self.layers = nn.ModuleList([DFlashDecoderLayer(config) for _ in range(config.num_hidden_layers)])
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.rotary_emb = Rotary(config.head_dim, config.rope_theta)
        self.fc = nn.Linear(len(config.target_layer_ids) * config.hidden_size, config.hidden_size, bias=False)
        self.hidden_norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.checkpoint_mode = CheckpointMode()
        self.flex: Any = None  # set to (compiled) flex_attention when the mask is a BlockMask
        self.reset_parameters()

    def reset_parameters(self, std: float = 0.02) -> None:
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, std=std)

    def _run_layer(self, layer: nn.Module, hidden: torch.Tensor, context: torch.Tensor, cos: torch.Tensor,
                   sin: torch.Tensor, mask: Any) -> torch.Tensor:
        mode = self.checkpoint_mode
        if not (mode.enabled and torch.is_grad_enabled()):
            return layer(hidden, context, cos, sin, mask, self.flex)
        if mode.keyword_calls:
            call = functools.partial(layer.__call__, hidden_states=hidden, target_hidden=context, cos=cos,
                                     sin=sin, mask=mask, flex=self.flex)
            return checkpoint(call, use_reentrant=mode.use_reentrant)
        return checkpoint(layer, hidden, context, cos, sin, mask, self.flex, use_reentrant=mode.use_reentrant)

    def forward(self, noise_embedding: torch.Tensor, target_hidden: torch.Tensor, position_ids: torch.Tensor,
                attention_mask: Any = None) -> torch.Tensor:
        """noise_embedding [B, Q, H] (embedded block tokens), target_hidden [B, S, n_tapped*H],
        position_ids [B, S + Q] (context positions then block positions) -> normed hidden [B, Q, H]."""
        context = self.hidden_norm(self.fc(target_hidden))
        cos, sin = self.rotary_emb(position_ids, noise_embedding.dtype)
        hidden = noise_embedding
        for layer in self.layers:
            hidden = self._run_layer(layer, hidden, context, cos, sin, attention_mask)
        return self.norm(hidden)
