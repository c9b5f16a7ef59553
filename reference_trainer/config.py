"""Presets and the run configuration.

Each component owns its config dataclass (``TargetConfig`` in target.py, ``DrafterConfig`` in drafter.py,
``ObjectiveConfig`` in loss.py, ``DataConfig`` in data.py); ``TrainConfig`` holds them plus the
pipeline and optimiser settings, and validates the combination.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from reference_trainer.data import DataConfig
from reference_trainer.drafter import DrafterConfig
from reference_trainer.graphs import GraphConfig
from reference_trainer.loss import ObjectiveConfig
from reference_trainer.target import TargetConfig


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    preset: str
    target: TargetConfig
    drafter: DrafterConfig
    objective: ObjectiveConfig
    data: DataConfig
    target_devices: tuple[str, ...] = ("cpu",)
    drafter_devices: tuple[str, ...] = ("cpu",)
    queue_size: int = 4
    # The optimiser and schedule of the published recipe (docs/trainer.md, "Faithful to the published DFlash"):
    # AdamW (torch's default betas and eps, no weight decay) on fp32 master weights, linear warm-up over
    # warmup_ratio of the schedule, then cosine to lr * min_lr_ratio at schedule_steps.
    lr: float = 6e-4
    adam_betas: tuple[float, float] = (0.9, 0.999)
    weight_decay: float = 0.0
    warmup_ratio: float = 0.04
    warmup_steps: int | None = None  # overrides warmup_ratio when set
    schedule_steps: int = 10_000  # the schedule's length (the recipe's total_steps); the CLI uses --max-steps
    min_lr_ratio: float = 0.0
    grad_clip: float = 1.0
    grad_accum: int = 1  # micro-batches per optimizer step and replica (sequences/step = replicas*batch*accum)
    max_steps: int | None = None
    max_seconds: float | None = None
    log_interval: int = 10
    save_every: int = 0  # 0 = only at the end of the run / on SIGTERM
    checkpoint_dir: str = "runs/reference_trainer"
    resume: str | None = None
    compile: bool = False
    compile_backend: str = "inductor"
    seed: int = 0
    scenario: str | None = None
    probes: frozenset[str] = field(default_factory=frozenset)
    wandb: str = "auto"  # auto (offline unless configured) | online | offline | off
    summary_json: str | None = None
    metrics_jsonl: str | None = None
    checkpoint_layers: bool = True  # activation-checkpoint the draft layers (recompute in backward)
    compile_layers: bool = False  # torch.compile each draft decoder layer, warmed up in build()
    fused_adamw: bool = False  # torch.optim.AdamW(fused=True): one kernel per step instead of foreach
    # CUDA graphs captured per thread (graphs.py) and the target forward's length buckets: runtime settings,
    # off by default until measured on the H200 (docs/trainer.md, "CUDA graphs, per thread").
    graphs: GraphConfig = field(default_factory=GraphConfig)
    ddp: bool = False  # one process per rank under torchrun, drafters in sync across ranks (ddp.py)

    def __post_init__(self) -> None:
        if not self.target_devices or not self.drafter_devices:
            raise ValueError("need at least one target device and one drafter device")
        for device in (*self.target_devices, *self.drafter_devices):
            if not (device == "cpu" or device == "cuda" or (device.startswith("cuda:") and device[5:].isdigit())):
                raise ValueError(f"device {device!r}: use cpu, cuda or cuda:N")
        if self.queue_size < 1:
            raise ValueError(f"--queue-size must be >= 1, got {self.queue_size}")
        if not self.lr > 0:
            raise ValueError(f"--lr must be > 0, got {self.lr}")
        if self.schedule_steps < 1 or not 0 <= self.warmup_ratio < 1 or not 0 <= self.min_lr_ratio <= 1:
            raise ValueError("need --schedule-steps >= 1, 0 <= --warmup-ratio < 1 and 0 <= --min-lr-ratio <= 1")
        if self.warmup_steps is not None and not 0 <= self.warmup_steps < self.schedule_steps:
            raise ValueError(f"--warmup-steps must be in [0, {self.schedule_steps}), got {self.warmup_steps}")
        if not all(0 <= b < 1 for b in self.adam_betas):
            raise ValueError(f"Adam betas must be in [0, 1), got {self.adam_betas}")
        if self.grad_accum < 1:
            raise ValueError(f"--grad-accum must be >= 1, got {self.grad_accum}")
        if not self.grad_clip > 0:
            raise ValueError("--grad-clip must be > 0")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"--max-steps must be >= 1, got {self.max_steps}")
        if self.max_seconds is not None and not self.max_seconds > 0:
            raise ValueError(f"--max-seconds must be > 0, got {self.max_seconds}")
        if self.log_interval < 1 or self.save_every < 0:
            raise ValueError("--log-interval must be >= 1 and --save-every >= 0")
        if self.wandb not in ("auto", "online", "offline", "off"):
            raise ValueError(f"--wandb must be auto, online, offline or off, got {self.wandb!r}")
        if self.ddp and self.resume:
            raise ValueError("--ddp does not resume yet (each rank reads its own batches): start without --resume")
        if self.drafter.hidden_size != self.target.hidden_size:
            raise ValueError("drafter hidden_size must equal the target's (it reuses the target's embedding)")
        if self.drafter.vocab_size != self.target.vocab_size:
            raise ValueError("drafter vocab_size must equal the target's (it reuses the target's lm_head)")
        if max(self.drafter.target_layer_ids) >= self.target.num_hidden_layers:
            raise ValueError("the drafter taps target layers the target does not have")
        if self.objective.block_size != self.drafter.block_size:
            raise ValueError("objective and drafter block_size differ")

    @property
    def warmup(self) -> int:
        """Warm-up steps: --warmup-steps, else the recipe's share of the schedule (int(0.04 * total))."""
        return self.warmup_steps if self.warmup_steps is not None else int(self.warmup_ratio * self.schedule_steps)

    def flat(self) -> dict[str, Any]:
        """A flat, JSON-safe view (for the probe board, wandb and the summary)."""
        out: dict[str, Any] = {}
        for key, value in dataclasses.asdict(self).items():
            if isinstance(value, dict):
                for sub, sub_value in value.items():
                    out[f"{key}.{sub}"] = sub_value
            elif isinstance(value, (frozenset, set)):
                out[key] = ",".join(sorted(value))
            elif isinstance(value, tuple):
                out[key] = ",".join(str(v) for v in value)
            else:
                out[key] = value
        return out


def _tiny() -> dict[str, Any]:
    """CPU: starts in seconds, loss falls visibly within a minute on 2 cores."""
    vocab = 2048
    target = TargetConfig(vocab_size=vocab, hidden_size=128, intermediate_size=256, num_hidden_layers=8,
                          num_attention_heads=4, num_key_value_heads=2, head_dim=32, linear_num_key_heads=2,
                          linear_num_value_heads=4, linear_key_head_dim=32, linear_value_head_dim=32,
                          rope_theta=10_000.0, embedding_std=0.2)
    drafter = DrafterConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                            head_dim=32, intermediate_size=256, rope_theta=10_000.0, num_target_layers=8,
                            mask_token_id=vocab - 1, vocab_size=vocab)
    objective = ObjectiveConfig(num_anchors=8, ce_chunk_tokens=64)
    data = DataConfig(seq_len=128, min_seq_len=64, batch_size=2, vocab_size=vocab, synthetic_vocab=64)
    # Not the recipe: a CPU demo whose loss must fall within a minute: a short warm-up, a floor at 10 % of lr
    # over a schedule far longer than any demo run, and beta2 0.95 (0.999 needs ~2x the steps here).
    return dict(target=target, drafter=drafter, objective=objective, data=data, lr=3e-3, warmup_steps=5,
                schedule_steps=10_000, min_lr_ratio=0.1, adam_betas=(0.9, 0.95), log_interval=10, queue_size=4)


QWEN35_MASK_TOKEN_ID = 248_070  # the published Qwen3.5/3.6 DFlash drafters' mask token
# Speed switches of the GPU presets, each measured on the H200 (docs/benchmarks.md, "Where the time goes"; all
# together 1.81x the old defaults): the draft layers' activations fit (no recompute), AdamW's fused kernel, and
# each draft layer compiled once in build(). The loss, block mask and short conv switches live in the
# component configs, set below.
GPU_SPEED: dict[str, Any] = {"checkpoint_layers": False, "fused_adamw": True, "compile_layers": True}
GPU_OBJECTIVE: dict[str, Any] = {"loss": "fused-compiled", "mask_build": "anchors"}
# CUDA graphs per thread and the target's length buckets (graphs.py): off on the GPU presets until measured on
# the H200 (docs/benchmarks.md, "CUDA graphs per thread"); if they pay, this is the one line to change
# (e.g. GraphConfig(mode="all", length_buckets=4)).
GPU_GRAPHS = GraphConfig()


def _qwen35_4b(num_anchors: int = 512) -> dict[str, Any]:
    """Qwen3.5-4B shapes: hidden 2560, 32 layers (24 GatedDeltaNet + 8 full attention), vocab 248,320;
    the published 5-layer Qwen3.5-4B DFlash drafter (tests/trainer/fixtures/qwen3.5-4b-dflash.json); seq
    3072, 512 anchors x block 16 and the optimiser of the published recipe."""
    vocab = 248_320
    target = TargetConfig(vocab_size=vocab, short_conv="auto")
    drafter = DrafterConfig(vocab_size=vocab, mask_token_id=QWEN35_MASK_TOKEN_ID)
    objective = ObjectiveConfig(num_anchors=num_anchors, ce_chunk_tokens=2048, **GPU_OBJECTIVE)
    data = DataConfig(seq_len=3072, min_seq_len=2560, batch_size=1, vocab_size=vocab)
    return dict(target=target, drafter=drafter, objective=objective, data=data, lr=6e-4, log_interval=10,
                queue_size=4, graphs=GPU_GRAPHS, **GPU_SPEED)


def _qwen35_9b() -> dict[str, Any]:
    """A larger target: Qwen3.5-9B shapes (hidden 4096, 32 layers, FFN 12288, untied lm_head) and a 5-layer
    drafter of hidden 4096 (tests/trainer/fixtures/qwen3.5-9b.json: what is published, what is assumed)."""
    vocab = 248_320
    target = TargetConfig(vocab_size=vocab, hidden_size=4096, intermediate_size=12_288, tie_word_embeddings=False,
                          short_conv="auto")
    drafter = DrafterConfig(vocab_size=vocab, hidden_size=4096, intermediate_size=12_288,
                            mask_token_id=QWEN35_MASK_TOKEN_ID)
    objective = ObjectiveConfig(num_anchors=512, ce_chunk_tokens=2048, **GPU_OBJECTIVE)
    data = DataConfig(seq_len=3072, min_seq_len=2560, batch_size=1, vocab_size=vocab)
    return dict(target=target, drafter=drafter, objective=objective, data=data, lr=6e-4, log_interval=10,
                queue_size=4, graphs=GPU_GRAPHS, **GPU_SPEED)


PRESETS: dict[str, Any] = {
    "tiny": _tiny,
    "qwen3.5-4b": _qwen35_4b,
    # Quick GPU checks: the same model shapes, 128 anchors (a quarter of the drafter and CE work).
    "qwen3.5-4b-short": lambda: _qwen35_4b(num_anchors=128),
    "qwen3.5-9b": _qwen35_9b,
}


def resolve_preset(name: str, cuda_available: bool) -> str:
    if name == "auto":
        return "qwen3.5-4b" if cuda_available else "tiny"
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r} (choose from auto, {', '.join(PRESETS)})")
    return name


def preset_fields(name: str) -> dict[str, Any]:
    return PRESETS[name]()
