"""The real presets against the published DFlash drafter config and training recipe (fixtures/, sources named).

Built on the meta device: every shape, no memory, no time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from reference_trainer.build import drafter_template
from reference_trainer.cli import parse_args
from reference_trainer.config import preset_fields
from reference_trainer.drafter import DFlashDraftModel

FIXTURES = Path(__file__).parent / "fixtures"
PUBLISHED = json.loads((FIXTURES / "qwen3.5-4b-dflash.json").read_text())
RECIPE = json.loads((FIXTURES / "dflash-recipe.json").read_text())


def _shapes(model: torch.nn.Module) -> dict[str, tuple[int, ...]]:
    return {name: tuple(t.shape) for name, t in model.state_dict().items()}


def _published_shapes(config: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """Every parameter of a DFlash drafter, from the published config's numbers alone."""
    h, ffn, d = config["hidden_size"], config["intermediate_size"], config["head_dim"]
    q, kv = config["num_attention_heads"] * d, config["num_key_value_heads"] * d
    taps = len(config["dflash_config"]["target_layer_ids"])
    shapes = {"norm.weight": (h,), "fc.weight": (h, taps * h), "hidden_norm.weight": (h,)}
    for i in range(config["num_hidden_layers"]):
        p = f"layers.{i}."
        shapes.update({
            p + "self_attn.q_proj.weight": (q, h), p + "self_attn.k_proj.weight": (kv, h),
            p + "self_attn.v_proj.weight": (kv, h), p + "self_attn.o_proj.weight": (h, q),
            p + "self_attn.q_norm.weight": (d,), p + "self_attn.k_norm.weight": (d,),
            p + "mlp.gate_proj.weight": (ffn, h), p + "mlp.up_proj.weight": (ffn, h),
            p + "mlp.down_proj.weight": (h, ffn),
            p + "input_layernorm.weight": (h,), p + "post_attention_layernorm.weight": (h,),
        })
    return shapes


@pytest.mark.parametrize("preset", ["qwen3.5-4b", "qwen3.5-4b-short"])
def test_preset_drafter_is_the_published_qwen35_4b_drafter(preset: str) -> None:
    drafter = preset_fields(preset)["drafter"]
    with torch.device("meta"):
        model = DFlashDraftModel(drafter)
    assert _shapes(model) == _published_shapes(PUBLISHED)
    ours = drafter.official_config_dict()
    for key in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                "num_key_value_heads", "head_dim", "rms_norm_eps", "rope_theta", "vocab_size", "num_target_layers",
                "block_size", "hidden_act", "attention_bias", "model_type", "architectures"):
        assert ours[key] == PUBLISHED[key], key
    assert ours["dflash_config"]["mask_token_id"] == PUBLISHED["dflash_config"]["mask_token_id"] == 248_070
    assert drafter.target_layer_ids == PUBLISHED["dflash_config"]["target_layer_ids"]
    assert set(PUBLISHED["layer_types"]) == {"full_attention"}  # our drafter has only full-attention layers
    assert len(PUBLISHED["layer_types"]) == drafter.num_hidden_layers


def test_published_config_builds_the_same_tensors_in_the_official_class() -> None:
    from dflash.model import DFlashDraftModel as OfficialDraftModel
    from transformers.models.qwen3 import Qwen3Config

    config = {k: v for k, v in PUBLISHED.items() if not k.startswith("_")}
    with torch.device("meta"):
        official = OfficialDraftModel(Qwen3Config(**config))
        ours = DFlashDraftModel(preset_fields("qwen3.5-4b")["drafter"])
    assert _shapes(official) == _shapes(ours)
    assert official.target_layer_ids == PUBLISHED["dflash_config"]["target_layer_ids"]


def test_real_preset_follows_the_published_recipe(tmp_path: Path) -> None:
    config, _ = parse_args(["--preset", "qwen3.5-4b", "--max-steps", "1000", "--probes", "none",
                            "--checkpoint-dir", str(tmp_path)])
    assert config.lr == RECIPE["learning_rate"]
    assert config.adam_betas == tuple(RECIPE["adam_betas"]) and config.weight_decay == RECIPE["weight_decay"]
    assert config.grad_clip == RECIPE["max_grad_norm"]
    assert config.schedule_steps == 1000 and config.warmup == int(RECIPE["warmup_ratio"] * 1000) == 40
    assert config.min_lr_ratio == RECIPE["min_lr"] / RECIPE["learning_rate"]
    assert config.objective.num_anchors == RECIPE["num_anchors"]
    assert config.objective.block_size == RECIPE["block_size"]
    assert config.objective.loss_decay_gamma == RECIPE["loss_decay_gamma"]
    assert config.data.seq_len == RECIPE["max_length"]
    with torch.device("meta"):
        template = drafter_template(config, keyword_calls=False)
    optimizer = torch.optim.AdamW(template.parameters(), lr=config.lr, betas=config.adam_betas)
    assert optimizer.defaults["eps"] == RECIPE["adam_eps"]


def test_recipe_schedule_warms_up_then_ends_at_zero() -> None:
    from reference_trainer.replicas import lr_factor

    factor = lr_factor(warmup=40, total=1000, min_ratio=0.0)
    assert factor(0) == pytest.approx(1 / 40) and factor(39) == pytest.approx(1.0)
    assert factor(40) == pytest.approx(1.0) and factor(520) == pytest.approx(0.5)
    assert factor(1000) == pytest.approx(0.0, abs=1e-12) and factor(5000) == pytest.approx(0.0, abs=1e-12)


def test_9b_preset_matches_what_is_published_of_qwen35_9b_and_its_drafter() -> None:
    published = json.loads((FIXTURES / "qwen3.5-9b.json").read_text())
    fields = preset_fields("qwen3.5-9b")
    target, drafter = fields["target"], fields["drafter"]
    for key, value in published["target"].items():
        assert getattr(target, key) == value, key
    assert not target.tie_word_embeddings  # the 9B model has its own lm_head
    for key, value in published["drafter"].items():
        assert getattr(drafter, key) == value, key
    with torch.device("meta"):
        model = DFlashDraftModel(drafter)
    assert model.fc.weight.shape == (4096, 5 * 4096)
    assert 1.0e9 < sum(p.numel() for p in model.parameters()) < 1.1e9  # "a 1B draft head"
