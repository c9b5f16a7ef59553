"""The drafter (official state-dict compatibility, gradients per checkpoint mode) and the frozen target."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from reference_trainer.config import preset_fields
from reference_trainer.drafter import CheckpointMode, DFlashDraftModel, DrafterConfig
from reference_trainer.loss import (
    ObjectiveConfig,
    build_blocks,
    chunked_loss,
    dense_block_mask,
    sample_anchors,
)
from reference_trainer.target import TargetLoadError, build_target_layer_ids, load_target

SMALL = DrafterConfig(hidden_size=64, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                      intermediate_size=96, num_target_layers=8, mask_token_id=99, vocab_size=100, rope_theta=10_000.0)


def _batch(config: DrafterConfig, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random inputs shaped like one training batch: context, blocks, positions, mask, labels, weights."""
    gen = torch.Generator().manual_seed(seed)
    seq, bs = 20, config.block_size
    ids = torch.randint(0, config.vocab_size - 1, (2, seq), generator=gen)
    loss_mask, lengths = torch.ones(2, seq), torch.tensor([20, 14])
    objective = ObjectiveConfig(block_size=bs, num_anchors=3)
    anchors, valid = sample_anchors(loss_mask, lengths, 3, gen)
    blocks = build_blocks(ids, loss_mask, lengths, anchors, valid, config.mask_token_id, objective)
    embed = torch.randn(config.vocab_size, config.hidden_size, generator=gen) * 0.1
    return {
        "noise": torch.nn.functional.embedding(blocks.block_ids, embed),
        "target_hidden": torch.randn(2, seq, len(config.target_layer_ids) * config.hidden_size, generator=gen),
        "positions": blocks.position_ids,
        "mask": dense_block_mask(blocks.anchors, blocks.block_valid, seq, bs),
        "labels": blocks.labels,
        "weights": blocks.weights,
        "head": embed,
    }


def _loss(model: DFlashDraftModel, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    out = model(batch["noise"], batch["target_hidden"], batch["positions"], batch["mask"])
    return chunked_loss(out, batch["head"], batch["labels"], batch["weights"], 16,
                        use_reentrant=model.checkpoint_mode.use_reentrant).loss


def test_target_layer_ids_match_official() -> None:
    from dflash.model import build_target_layer_ids as official

    for layers, drafts in [(32, 5), (8, 2), (64, 5), (40, 8), (36, 1)]:
        assert build_target_layer_ids(layers, drafts) == official(layers, drafts)
    assert build_target_layer_ids(32, 5) == [1, 8, 15, 22, 29]


def test_trained_state_dict_loads_into_official_class_and_matches(tmp_path: Path) -> None:
    from dflash.model import DFlashDraftModel as OfficialDraftModel
    from transformers.models.qwen3 import Qwen3Config

    torch.manual_seed(0)
    model = DFlashDraftModel(SMALL)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for step in range(3):  # trained weights, not the init
        _loss(model, _batch(SMALL, step)).backward()
        optimizer.step()
        optimizer.zero_grad()
    torch.save(model.state_dict(), tmp_path / "drafter.pt")
    official = OfficialDraftModel(Qwen3Config(**SMALL.official_config_dict()))
    result = official.load_state_dict(torch.load(tmp_path / "drafter.pt"), strict=True)
    assert not result.missing_keys and not result.unexpected_keys
    assert official.target_layer_ids == SMALL.target_layer_ids
    official.eval()
    model.eval()
    batch = _batch(SMALL, seed=42)
    with torch.no_grad():
        ours = model(batch["noise"], batch["target_hidden"], batch["positions"], batch["mask"])
        theirs = official(position_ids=batch["positions"], attention_mask=batch["mask"],
                          noise_embedding=batch["noise"], target_hidden=batch["target_hidden"])
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)


def _grad_none(mode: CheckpointMode) -> list[str]:
    torch.manual_seed(0)
    model = DFlashDraftModel(SMALL)
    model.checkpoint_mode = mode
    _loss(model, _batch(SMALL)).backward()
    return [name for name, p in model.named_parameters() if p.requires_grad and p.grad is None]


@pytest.mark.parametrize("mode", [CheckpointMode(), CheckpointMode(use_reentrant=True),
                                  CheckpointMode(keyword_calls=True), CheckpointMode(enabled=False)],
                         ids=["default", "reentrant-positional", "non-reentrant-keyword", "no-checkpoint"])
def test_every_trainable_parameter_gets_a_gradient(mode: CheckpointMode) -> None:
    assert _grad_none(mode) == []


def test_reentrant_with_keyword_calls_silently_loses_layer_gradients() -> None:
    """The seed incident: proves the gradient check above can fail."""
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
        missing = _grad_none(CheckpointMode(use_reentrant=True, keyword_calls=True))
    assert any(name.startswith("layers.0.self_attn.q_proj") for name in missing)
    assert "fc.weight" in missing and "hidden_norm.weight" in missing
    assert "norm.weight" not in missing  # only the final norm still trains


def _tiny_target(path: str | None = None):
    fields = preset_fields("tiny")
    target = fields["target"] if path is None else type(fields["target"])(**{**fields["target"].__dict__, "path": path})
    torch.manual_seed(0)
    return fields, load_target(target, fields["drafter"].target_layer_ids, torch.device("cpu"), torch.float32)


def test_target_hidden_states_are_the_tapped_layers_without_extra_layers() -> None:
    from transformers.models.qwen3_5 import Qwen3_5TextModel

    fields, target = _tiny_target()
    ids = fields["drafter"].target_layer_ids
    assert len(target.model.layers) == max(ids) + 1 < fields["target"].num_hidden_layers
    assert target.kernels.line() == "GatedDeltaNet: torch fallback (no CUDA)"
    assert target.lm_head_weight is target.embed_weight  # tied: the drafter's frozen head
    full = Qwen3_5TextModel(fields["target"].hf_config()).eval()
    missing = full.load_state_dict(target.model.state_dict(), strict=False).missing_keys
    assert missing and all(k.startswith(tuple(f"layers.{i}." for i in range(max(ids) + 1, 8))) for k in missing)
    tokens = torch.randint(0, 60, (2, 33))
    with torch.no_grad():
        reference = full(tokens, output_hidden_states=True).hidden_states
    expected = torch.cat([reference[i + 1] for i in ids], dim=-1)  # hidden_states[0] is the embedding
    torch.testing.assert_close(target.hidden_states(tokens), expected)


def test_target_loads_from_a_local_checkpoint(tmp_path: Path) -> None:
    from transformers.models.qwen3_5 import Qwen3_5ForCausalLM

    fields, random_target = _tiny_target()
    torch.manual_seed(1)
    causal = Qwen3_5ForCausalLM(fields["target"].hf_config())
    causal.save_pretrained(tmp_path / "ckpt")
    _, loaded = _tiny_target(str(tmp_path / "ckpt"))
    torch.testing.assert_close(loaded.embed_weight, causal.model.embed_tokens.weight)
    torch.testing.assert_close(loaded.model.layers[1].mlp.up_proj.weight, causal.model.layers[1].mlp.up_proj.weight)


@pytest.mark.parametrize("setup, message", [
    (lambda p: None, "not a directory"),
    (lambda p: p.mkdir(), "no config.json"),
    (lambda p: (p.mkdir(), (p / "config.json").write_text("{oops")), "config.json unreadable"),
    (lambda p: (p.mkdir(), (p / "config.json").write_text('{"model_type": "llama"}')), "not a Qwen3.5"),
    (lambda p: (p.mkdir(), (p / "config.json").write_text('{"model_type": "qwen3_5_text"}')), "no *.safetensors"),
])
def test_bad_target_path_is_one_clear_error(tmp_path: Path, setup, message: str) -> None:
    path = tmp_path / "target"
    setup(path)
    with pytest.raises(TargetLoadError, match=message.replace("*", r"\*")):
        _tiny_target(str(path))


def _fla_like_conv(calls: list[int]):
    """fla's causal_conv1d contract (x [B, T, D], weight [D, W] -> (y [B, T, D], state)), in plain torch."""

    def causal_conv1d(x: torch.Tensor, weight: torch.Tensor | None = None, bias: torch.Tensor | None = None,
                      residual: torch.Tensor | None = None, initial_state: torch.Tensor | None = None,
                      output_final_state: bool = False, activation: str | None = None,
                      **kwargs: object) -> tuple[torch.Tensor, None]:
        calls.append(1)
        assert x.shape[-1] == weight.shape[0]  # channels last, as fla takes them
        width = weight.shape[-1]
        y = torch.nn.functional.conv1d(x.transpose(1, 2), weight.unsqueeze(1), bias, padding=width - 1,
                                       groups=x.shape[-1])[..., : x.shape[1]]
        y = torch.nn.functional.silu(y) if activation in ("silu", "swish") else y
        return y.transpose(1, 2), None

    causal_conv1d.__module__ = "fla.modules.conv.causal_conv1d"
    return causal_conv1d


def test_fla_short_conv_adapter_feeds_fla_its_layout_and_changes_nothing() -> None:
    """The GatedDeltaNet short conv on fla's kernel contract gives the torch reference's hidden states."""
    from transformers.models.qwen3_5 import modeling_qwen3_5 as mq

    from probes.fastpath import bound_kernel
    from reference_trainer.target import install_short_conv

    fields, target = _tiny_target()
    tokens = torch.randint(0, 60, (2, 33))
    with torch.no_grad():
        reference = target.hidden_states(tokens)
    calls: list[int] = []
    try:
        assert install_short_conv("fla", torch.device("cpu"), implementation=_fla_like_conv(calls)) == "fla"
        assert bound_kernel(mq.causal_conv1d_fn) == "fla"  # probes and reports see fla's kernel
        with torch.no_grad():
            adapted = target.hidden_states(tokens)
    finally:
        assert install_short_conv("torch", torch.device("cpu")) == "torch"
    gdn_layers = [m for m in target.model.modules() if type(m).__name__.endswith("GatedDeltaNet")]
    assert len(calls) == len(gdn_layers) == 5  # every GatedDeltaNet layer of the 6 built goes through fla's kernel
    torch.testing.assert_close(adapted, reference)
    assert bound_kernel(mq.causal_conv1d_fn) != "fla"


def test_short_conv_fla_without_fla_is_a_usage_error() -> None:
    from reference_trainer.errors import UserError
    from reference_trainer.target import fla_causal_conv1d, install_short_conv

    if fla_causal_conv1d() is not None:
        pytest.skip("flash-linear-attention is importable here")
    with pytest.raises(UserError, match="--short-conv fla"):
        install_short_conv("fla", torch.device("cpu"))
    assert install_short_conv("auto", torch.device("cpu")) == "torch"
