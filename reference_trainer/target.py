"""The frozen Qwen3.5-style target: hidden states of the DFlash target layers, nothing more.

Built from transformers' own Qwen3.5 classes so the GatedDeltaNet layers bind the same kernels a real
Qwen3.5 run binds (flash-linear-attention on CUDA when installed, the PyTorch reference otherwise).
Two pieces of waste in the usual "call the CausalLM with output_hidden_states=True" approach are avoided:

- no full-vocab logits (3072 x 248,320 bf16 = 1.5 GB and ~3.9 TFLOP per sequence on Qwen3.5-4B): we hold
  the backbone only and keep the lm_head weight aside for the drafter;
- no layers past the last tapped one: the model is *built* with ``max(target_layer_ids) + 1`` layers
  (30 of 32 on Qwen3.5-4B), and we run the decoder layers ourselves.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from reference_trainer.errors import ExitCode, UserError


def build_target_layer_ids(num_target_layers: int, num_draft_layers: int) -> list[int]:
    """DFlash's rule: tap ``num_draft_layers`` target layers spread evenly over [1, L-3].

    Same rule as the official ``dflash.model.build_target_layer_ids`` (Qwen3.5-4B, 5 draft layers:
    [1, 8, 15, 22, 29]); tested against it.
    """
    if num_draft_layers == 1:
        return [num_target_layers // 2]
    start, end = 1, num_target_layers - 3
    span = end - start
    return [round(start + (i * span) / (num_draft_layers - 1)) for i in range(num_draft_layers)]


@dataclass(frozen=True, kw_only=True)
class TargetConfig:
    """Shapes of a Qwen3.5-style hybrid target (GatedDeltaNet + gated full attention every 4th layer)."""

    vocab_size: int = 248_320
    hidden_size: int = 2560
    intermediate_size: int = 9216
    num_hidden_layers: int = 32
    num_attention_heads: int = 16
    num_key_value_heads: int = 4
    head_dim: int = 256
    linear_num_key_heads: int = 16
    linear_num_value_heads: int = 32
    linear_key_head_dim: int = 128
    linear_value_head_dim: int = 128
    full_attention_interval: int = 4
    rope_theta: float = 10_000_000.0
    tie_word_embeddings: bool = True
    # GatedDeltaNet's short causal conv: "torch" (transformers' F.conv1d reference, as causal-conv1d is not
    # installed; the default until fla's is measured on the H200), "fla" (flash-linear-attention's Triton
    # kernel), "auto" (fla when importable on CUDA).
    short_conv: str = "torch"
    # Random init only: std of the embedding (= tied lm_head). HF's 0.02 gives |e| ~ 0.02*sqrt(H), which on a
    # tiny model caps the drafter's logits near 2 and makes "loss falls" take thousands of steps.
    embedding_std: float | None = None
    path: str | None = None  # a local checkpoint dir (config.json + safetensors); None = random init

    def __post_init__(self) -> None:
        for name in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "head_dim"):
            if getattr(self, name) <= 0:
                raise ValueError(f"target {name} must be > 0, got {getattr(self, name)}")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError("target num_attention_heads must be a multiple of num_key_value_heads")
        if self.short_conv not in ("auto", "torch", "fla"):
            raise ValueError(f"short_conv must be auto, torch or fla, got {self.short_conv!r}")

    def hf_config(self, num_layers_built: int | None = None) -> Any:
        """The transformers ``Qwen3_5TextConfig`` for these shapes (optionally cut to fewer layers)."""
        from transformers.models.qwen3_5 import Qwen3_5TextConfig

        layers = self.num_hidden_layers if num_layers_built is None else num_layers_built
        layer_types = [
            "full_attention" if (i + 1) % self.full_attention_interval == 0 else "linear_attention"
            for i in range(layers)
        ]
        return Qwen3_5TextConfig(
            vocab_size=self.vocab_size,
            hidden_size=self.hidden_size,
            intermediate_size=self.intermediate_size,
            num_hidden_layers=layers,
            num_attention_heads=self.num_attention_heads,
            num_key_value_heads=self.num_key_value_heads,
            head_dim=self.head_dim,
            linear_num_key_heads=self.linear_num_key_heads,
            linear_num_value_heads=self.linear_num_value_heads,
            linear_key_head_dim=self.linear_key_head_dim,
            linear_value_head_dim=self.linear_value_head_dim,
            layer_types=layer_types,
            rope_parameters={"rope_theta": self.rope_theta, "partial_rotary_factor": 0.25, "rope_type": "default"},
            tie_word_embeddings=self.tie_word_embeddings,
            attn_implementation="sdpa",
        )


class TargetLoadError(Exception):
    """A --target-path that is missing or not a Qwen3.5 checkpoint (the CLI turns it into one line)."""


@dataclass(frozen=True)
class KernelReport:
    """Which GatedDeltaNet kernel the target's layers call, so a slow fallback is reported, never hidden."""

    chunk_gated_delta_rule: str  # "fla" | "torch_fallback"
    module: str  # the implementation's __module__
    reason: str  # why, in words
    short_conv: str = "torch"  # "fla" (Triton) | "torch" (transformers' F.conv1d reference)

    @property
    def fast(self) -> bool:
        return self.chunk_gated_delta_rule == "fla"

    def line(self) -> str:
        if self.fast:
            return f"GatedDeltaNet: fla kernels ({self.module})"
        return f"GatedDeltaNet: torch fallback ({self.reason})"


def _closure_value(fn: Any, name: str) -> Any:
    code = getattr(fn, "__code__", None)
    if code is None or fn.__closure__ is None:
        return None
    for var, cell in zip(code.co_freevars, fn.__closure__, strict=False):
        if var == name:
            return cell.cell_contents
    return None


def _gdn_functions(layer: nn.Module) -> tuple[Any, Any]:
    """(bound chunk_gated_delta_rule, its pure-torch reference) for one GatedDeltaNet layer.

    transformers < 5.1x binds the op per layer (``layer.chunk_gated_delta_rule``); newer versions call a
    module-level function wrapped by ``use_kernel_func_from_hub_with_fallback`` whose closure holds the
    resolved ``implementation`` and the ``torch_function`` fallback.
    """
    from transformers.models.qwen3_5 import modeling_qwen3_5 as mq

    bound = getattr(layer, "chunk_gated_delta_rule", None)
    if bound is not None:
        return bound, getattr(mq, "torch_chunk_gated_delta_rule", None)
    wrapped = mq.torch_chunk_gated_delta_rule
    impl = _closure_value(wrapped, "implementation") or wrapped
    reference = _closure_value(wrapped, "torch_function") or getattr(wrapped, "__wrapped__", wrapped)
    return impl, reference


def gdn_kernel_report(model: nn.Module, device: torch.device) -> KernelReport:
    gdn = next((m for m in model.modules() if type(m).__name__.endswith("GatedDeltaNet")), None)
    if gdn is None:
        return KernelReport("torch_fallback", "-", "no GatedDeltaNet layer")
    impl, _ = _gdn_functions(gdn)
    module = getattr(impl, "__module__", "?") or "?"
    if module.startswith("fla."):
        return KernelReport("fla", module, "flash-linear-attention bound")
    if device.type != "cuda":
        reason = "no CUDA"
    else:
        reason = "flash-linear-attention not importable (pip install flash-linear-attention[cuda])"
    return KernelReport("torch_fallback", module, reason)


def force_gdn_torch_fallback(model: nn.Module) -> None:
    """The ``slow-fallback`` scenario: make every GatedDeltaNet layer call the PyTorch reference.

    Process-wide on transformers versions that call a module-level op (there is only one such op).
    """
    from transformers.models.qwen3_5 import modeling_qwen3_5 as mq

    for module in model.modules():
        if not type(module).__name__.endswith("GatedDeltaNet"):
            continue
        _, reference = _gdn_functions(module)
        if getattr(module, "chunk_gated_delta_rule", None) is not None:
            module.chunk_gated_delta_rule = reference
        elif reference is not None:
            mq.torch_chunk_gated_delta_rule = reference


# --------------------------------------------------------------------------------------------------------
# The short causal convolution of the GatedDeltaNet layers
# --------------------------------------------------------------------------------------------------------

_FLA_CONV_PATHS = ("fla.modules.convolution", "fla.modules.causal_conv1d", "fla.modules.conv", "fla.modules")
_HF_CONV: dict[str, Any] = {}  # transformers' own causal_conv1d_fn, kept to put it back


def fla_causal_conv1d() -> Any:
    """flash-linear-attention's Triton causal conv (x [B, T, D], weight [D, W]) -> (y, state), or None."""
    import importlib

    for path in _FLA_CONV_PATHS:
        try:
            fn = getattr(importlib.import_module(path), "causal_conv1d", None)
        except Exception:  # not installed, or no Triton driver on this machine
            fn = None
        if callable(fn):
            return fn
    return None


def _channels_first(fla_conv: Any) -> Any:
    """transformers' ``causal_conv1d_fn(x [B, D, T], weight [D, W], bias, activation)`` on fla's kernel.

    fla since late 2024 takes x as [B, T, D] (its signature has ``residual``); older releases took [B, D, T]."""
    seq_first = "residual" in inspect.signature(fla_conv).parameters

    @functools.wraps(fla_conv)  # __module__ stays fla's: probes and reports see the kernel that runs
    def causal_conv1d_fn(hidden_states: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
                         activation: str | None = None, **kwargs: Any) -> torch.Tensor:
        if any(kwargs.get(k) is not None for k in ("seq_idx", "cu_seqlens", "cu_seq_lens_q")):
            raise ValueError("packed sequences are not supported by the trainer's fla short-conv adapter")
        # [B, D, T] is a transposed view of the in-projection's contiguous [B, T, D]: no copy either way.
        x = hidden_states.transpose(1, 2) if seq_first else hidden_states
        result = fla_conv(x=x, weight=weight, bias=bias, activation=activation)
        out = result[0] if isinstance(result, tuple) else result
        return out.transpose(1, 2) if seq_first else out

    return causal_conv1d_fn


def install_short_conv(kind: str, device: torch.device, implementation: Any = None) -> str:
    """Bind the short conv every Qwen3.5 GatedDeltaNet layer calls (process-wide: transformers calls a
    module-level function); returns "fla" or "torch". ``implementation`` replaces fla's kernel (tests)."""
    from transformers.models.qwen3_5 import modeling_qwen3_5 as mq

    original = _HF_CONV.setdefault("fn", mq.causal_conv1d_fn)
    fla_conv = implementation or (fla_causal_conv1d() if device.type == "cuda" or kind == "fla" else None)
    if kind == "fla" and fla_conv is None:
        raise UserError("--short-conv fla: flash-linear-attention's causal_conv1d is not importable here (it needs "
                        "CUDA and pip install flash-linear-attention[cuda]); use auto or torch", ExitCode.USAGE)
    if kind == "torch" or fla_conv is None:
        mq.causal_conv1d_fn = original
        return "torch"
    mq.causal_conv1d_fn = _channels_first(fla_conv)
    return "fla"


@dataclass
class FrozenTarget:
    """The target backbone (cut after the last tapped layer) plus the frozen embedding and lm_head weights."""

    model: nn.Module  # Qwen3_5TextModel with max(layer_ids)+1 layers
    lm_head_weight: torch.Tensor  # [vocab, hidden]; the embedding itself when tied
    layer_ids: list[int]
    device: torch.device
    kernels: KernelReport
    dtype: torch.dtype = torch.float32
    _rotary_cache: dict[tuple[int, int], tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)

    @property
    def embed_weight(self) -> torch.Tensor:
        return self.model.embed_tokens.weight

    @torch.no_grad()  # not inference_mode: the drafter saves these tensors for its backward
    def hidden_states(self, input_ids: torch.Tensor) -> torch.Tensor:
        """[B, S] token ids -> [B, S, len(layer_ids) * H]: the tapped layers' outputs, concatenated.

        Only causal attention is used (right padding cannot leak into earlier positions), so no mask is
        built: full-attention layers run SDPA with is_causal, GatedDeltaNet layers are causal by nature.
        """
        model = self.model
        batch, seq = input_ids.shape
        hidden = model.embed_tokens(input_ids)
        # Qwen3.5's rotary takes (3, B, S) multimodal positions; plain text uses the same ids on all 3 axes.
        positions = torch.arange(seq, device=input_ids.device).view(1, 1, -1).expand(3, batch, -1)
        position_embeddings = model.rotary_emb(hidden, positions)
        wanted = {layer_id: i for i, layer_id in enumerate(self.layer_ids)}
        taps: list[torch.Tensor | None] = [None] * len(self.layer_ids)
        for index, layer in enumerate(model.layers):
            hidden = layer(hidden, position_embeddings=position_embeddings, attention_mask=None,
                           position_ids=positions[0])
            if index in wanted:  # hidden_states[layer_id + 1] in HF's numbering (0 is the embedding)
                taps[wanted[index]] = hidden
        return torch.cat([t for t in taps if t is not None], dim=-1)


def _read_checkpoint_config(path: Path) -> dict[str, Any]:
    if not path.is_dir():
        raise TargetLoadError(f"--target-path {path}: not a directory (give a local Qwen3.5 checkpoint directory)")
    config_file = path / "config.json"
    if not config_file.is_file():
        raise TargetLoadError(f"--target-path {path}: no config.json in it (is it a Hugging Face checkpoint?)")
    try:
        raw = json.loads(config_file.read_text())
    except (OSError, ValueError) as err:
        raise TargetLoadError(f"--target-path {path}: config.json unreadable: {err}") from err
    text = raw.get("text_config", raw) if isinstance(raw, dict) else None
    if not isinstance(text, dict) or text.get("model_type") not in ("qwen3_5_text", "qwen3_5"):
        raise TargetLoadError(
            f"--target-path {path}: model_type {raw.get('model_type') if isinstance(raw, dict) else '?'!r} "
            "is not a Qwen3.5 text model"
        )
    if not any(path.glob("*.safetensors")):
        raise TargetLoadError(f"--target-path {path}: no *.safetensors weights in it")
    return raw


def load_target(config: TargetConfig, layer_ids: list[int], device: torch.device, dtype: torch.dtype) -> FrozenTarget:
    """Random-init (seeded by the caller) or load the target; frozen, eval, on ``device``."""
    from transformers.models.qwen3_5 import Qwen3_5ForCausalLM, Qwen3_5TextModel

    layers_built = max(layer_ids) + 1
    if device.type == "cuda":
        # fla's FusedRMSNormGated allocates on torch.cuda.current_device(): set it before building.
        torch.cuda.set_device(device)
    if config.path is None:
        hf_config = config.hf_config(layers_built)
        with torch.device(device):
            model = Qwen3_5TextModel(hf_config).to(dtype)
        if config.embedding_std is not None:
            with torch.no_grad():
                model.embed_tokens.weight.normal_(0.0, config.embedding_std)
        if config.tie_word_embeddings:
            lm_head_weight = model.embed_tokens.weight
        else:
            lm_head_weight = nn.Linear(config.hidden_size, config.vocab_size, bias=False, device=device,
                                       dtype=dtype).weight
    else:
        path = Path(config.path)
        raw = _read_checkpoint_config(path)
        from transformers.models.qwen3_5 import Qwen3_5TextConfig

        text = dict(raw.get("text_config", raw))
        text.pop("model_type", None)
        if isinstance(text.get("layer_types"), list):
            text["layer_types"] = text["layer_types"][:layers_built]
        hf_config = Qwen3_5TextConfig(**{**text, "num_hidden_layers": layers_built})
        hf_config._attn_implementation = "sdpa"
        # Released Qwen3.5 checkpoints are VLMs whose text weights live under model.language_model.
        causal = Qwen3_5ForCausalLM.from_pretrained(
            os.fspath(path), config=hf_config, dtype=dtype,
            key_mapping={r"^model\.language_model\.": "model."},
        ).to(device)  # no device_map: that needs accelerate, which the trainer does not depend on
        model = causal.model
        lm_head_weight = causal.lm_head.weight
    model.eval().requires_grad_(False)
    lm_head_weight.requires_grad_(False)
    return FrozenTarget(model=model, lm_head_weight=lm_head_weight, layer_ids=list(layer_ids), device=device,
                        kernels=dataclasses.replace(gdn_kernel_report(model, device),
                                                    short_conv=install_short_conv(config.short_conv, device)),
                        dtype=dtype)
