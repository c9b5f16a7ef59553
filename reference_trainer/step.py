"""The work of one batch: the target forward, and the drafter's forward + loss + backward on one replica.

Pure per-batch functions; the threads, queue and barriers around them live in train.py. The scenario's
effects arrive as frozen settings (``Scenario``), read here and nowhere else on the hot path.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from reference_trainer.data import Batch
from reference_trainer.fused_loss import fused_loss
from reference_trainer.loss import (
    Blocks,
    LossParts,
    ObjectiveConfig,
    build_blocks,
    chunked_loss,
    dense_block_mask,
    flex_block_mask,
    sample_anchors,
)
from reference_trainer.scenarios import churn_allocator

if TYPE_CHECKING:
    from reference_trainer.config import TrainConfig
    from reference_trainer.replicas import Replica
    from reference_trainer.scenarios import Scenario
    from reference_trainer.target import FrozenTarget


def to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Host -> device without a sync: a pageable-memory copy blocks the CPU until the stream drains, so the
    (small) host tensors are pinned first and copied asynchronously."""
    if device.type != "cuda":
        return tensor.to(device)
    return tensor.pin_memory().to(device, non_blocking=True)


def target_forward(target: FrozenTarget, batch: Batch, scenario: Scenario) -> torch.Tensor:
    ids = to_device(batch.input_ids, target.device)
    hidden = target.hidden_states(ids)
    for _ in range(scenario.target_repeat - 1):  # target-bound scenario: the same forward again
        hidden = target.hidden_states(ids)
    return hidden


@dataclass(frozen=True)
class DraftInputs:
    """What the drafter needs for one batch besides the hidden states: blocks, labels, weights, the mask."""

    blocks: Blocks
    mask: Any  # a flex BlockMask (CUDA) or a dense bool mask (SDPA)


def _autocast(device: torch.device) -> contextlib.AbstractContextManager[Any]:
    return torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else contextlib.nullcontext()


def draft_inputs(replica: Replica, batch: Batch, config: TrainConfig) -> DraftInputs:
    """Anchors (a function of seed and batch index), blocks and the block mask, on the replica's device."""
    device, objective = replica.device, config.objective
    input_ids = to_device(batch.input_ids, device)
    generator = torch.Generator().manual_seed(config.seed * 1_000_003 + batch.index)
    anchors, valid = sample_anchors(batch.loss_mask, batch.lengths, objective.num_anchors, generator)
    blocks = build_blocks(input_ids, to_device(batch.loss_mask, device), to_device(batch.lengths, device),
                          to_device(anchors, device), to_device(valid, device), config.drafter.mask_token_id,
                          objective)
    seq = input_ids.shape[1]
    if replica.model.flex is not None:
        mask = flex_block_mask(blocks.anchors, blocks.block_valid, seq, objective.block_size, objective.mask_build)
    else:
        mask = dense_block_mask(blocks.anchors, blocks.block_valid, seq, objective.block_size)
    return DraftInputs(blocks=blocks, mask=mask)


def draft_forward(replica: Replica, hidden: torch.Tensor, inputs: DraftInputs) -> torch.Tensor:
    """The drafter's normed output for every block position, [B, N*bs, H]."""
    with _autocast(replica.device):
        noise = torch.nn.functional.embedding(inputs.blocks.block_ids, replica.embed_weight)
        return replica.forward(noise, hidden, inputs.blocks.position_ids, inputs.mask)


def draft_loss(replica: Replica, out: torch.Tensor, inputs: DraftInputs, objective: ObjectiveConfig,
               sync_per_chunk: bool = False) -> LossParts:
    """The weighted CE over the frozen lm_head, by ``objective.loss``."""
    blocks = inputs.blocks
    with _autocast(replica.device):
        if objective.loss == "chunked":
            return chunked_loss(out, replica.lm_head_weight, blocks.labels, blocks.weights, objective.ce_chunk_tokens,
                                use_reentrant=objective.use_reentrant, sync_per_chunk=sync_per_chunk)
        return fused_loss(out, replica.lm_head_weight, blocks.labels, blocks.weights, objective.block_size,
                          objective.ce_chunk_tokens, compiled=objective.loss == "fused-compiled",
                          sync_per_chunk=sync_per_chunk)


def drafter_forward_backward(replica: Replica, hidden: torch.Tensor, batch: Batch, config: TrainConfig,
                             scenario: Scenario, loss_scale: float = 1.0) -> LossParts:
    """Inputs, forward, weighted CE, backward of ``loss * loss_scale`` (gradients accumulate in the replica's
    parameters; 1 / accumulation steps, as the recipe scales). No host sync."""
    inputs = draft_inputs(replica, batch, config)
    repeat = scenario.drafter_repeat
    parts = None
    for _ in range(repeat):  # drafter-bound scenario: same gradient, `repeat` times the work
        out = draft_forward(replica, hidden, inputs)
        parts = draft_loss(replica, out, inputs, config.objective, scenario.sync_per_chunk)
        (parts.loss * (loss_scale / repeat)).backward()
    assert parts is not None
    if scenario.alloc_churn:
        churn_allocator(replica.device)
    # Keep numbers, not the graph: a live graph pins AccumulateGrad nodes to this step's stream.
    return LossParts(loss=parts.loss.detach(), weight_sum=parts.weight_sum.detach(), correct=parts.correct,
                     trained=parts.trained)
