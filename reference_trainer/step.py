"""The work of one batch: the target forward, and the drafter's forward + loss + backward on one replica.

Pure per-batch functions; the threads, queue and barriers around them live in train.py. The scenario's
effects arrive as frozen settings (``Scenario``), read here and nowhere else on the hot path.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import torch

from reference_trainer.data import Batch
from reference_trainer.loss import (
    LossParts,
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


def drafter_forward_backward(replica: Replica, hidden: torch.Tensor, batch: Batch, config: TrainConfig,
                             scenario: Scenario, loss_scale: float = 1.0) -> LossParts:
    """Forward, weighted CE, backward of ``loss * loss_scale`` (gradients accumulate in the replica's
    parameters; 1 / accumulation steps, as the recipe scales). No host sync."""
    device = replica.device
    objective = config.objective
    input_ids = to_device(batch.input_ids, device)
    generator = torch.Generator().manual_seed(config.seed * 1_000_003 + batch.index)  # anchors: f(seed, batch)
    anchors, valid = sample_anchors(batch.loss_mask, batch.lengths, objective.num_anchors, generator)
    blocks = build_blocks(input_ids, to_device(batch.loss_mask, device), to_device(batch.lengths, device),
                          to_device(anchors, device), to_device(valid, device), config.drafter.mask_token_id,
                          objective)
    seq = input_ids.shape[1]
    if replica.model.flex is not None:
        mask = flex_block_mask(blocks.anchors, blocks.block_valid, seq, objective.block_size)
    else:
        mask = dense_block_mask(blocks.anchors, blocks.block_valid, seq, objective.block_size)
    repeat = scenario.drafter_repeat
    autocast = (torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda"
                else contextlib.nullcontext())
    parts = None
    for _ in range(repeat):  # drafter-bound scenario: same gradient, `repeat` times the work
        with autocast:
            noise = torch.nn.functional.embedding(blocks.block_ids, replica.embed_weight)
            out = replica.forward(noise, hidden, blocks.position_ids, mask)
            parts = chunked_loss(out, replica.lm_head_weight, blocks.labels, blocks.weights,
                                 objective.ce_chunk_tokens, use_reentrant=objective.use_reentrant,
                                 sync_per_chunk=scenario.sync_per_chunk)
        (parts.loss * (loss_scale / repeat)).backward()
    assert parts is not None
    if scenario.alloc_churn:
        churn_allocator(device)
    # Keep numbers, not the graph: a live graph pins AccumulateGrad nodes to this step's stream.
    return LossParts(loss=parts.loss.detach(), weight_sum=parts.weight_sum.detach(), correct=parts.correct,
                     trained=parts.trained)
