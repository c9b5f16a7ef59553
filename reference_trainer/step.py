"""The work of one batch: the target forward, and the drafter's forward + loss + backward on one replica.

Pure per-batch functions; the threads, queue and barriers around them live in train.py. The scenario's
effects arrive as frozen settings (``Scenario``), read here and nowhere else on the hot path.

With ``--cuda-graphs all`` the drafter's step (its inputs on the device, forward, loss, parameter gradients)
is one CUDA graph per drafter thread (``GraphedDrafter``); the target forward's graphs live in graphs.py.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from reference_trainer.data import Batch
from reference_trainer.fused_loss import fused_loss
from reference_trainer.graphs import BucketedTarget, ThreadGraphs
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


def target_forward(target: FrozenTarget, batch: Batch, scenario: Scenario,
                   bucketed: BucketedTarget | None = None) -> torch.Tensor:
    """[B, S, n_tapped * H]: eagerly at the batch's width, or through ``bucketed`` (length buckets, and this
    thread's CUDA graphs when it has them)."""
    if bucketed is not None:
        hidden = bucketed.forward(batch)
        for _ in range(scenario.target_repeat - 1):  # target-bound scenario: the same forward again
            hidden = bucketed.forward(batch)
        return hidden
    ids = to_device(batch.input_ids, target.device)
    hidden = target.hidden_states(ids)
    for _ in range(scenario.target_repeat - 1):
        hidden = target.hidden_states(ids)
    return hidden


@dataclass(frozen=True)
class DraftInputs:
    """What the drafter needs for one batch besides the hidden states: blocks, labels, weights, the mask."""

    blocks: Blocks
    mask: Any  # a flex BlockMask (CUDA) or a dense bool mask (SDPA)


def _autocast(device: torch.device) -> contextlib.AbstractContextManager[Any]:
    return torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else contextlib.nullcontext()


@dataclass(frozen=True)
class HostDraftInputs:
    """The drafter's inputs as host tensors (pinned when a drafter is on CUDA): the batch and its anchors.

    A pure function of (seed, batch index), so the producing target thread computes it, off the drafter
    thread's critical path; the sequential loop computes it inline. The same values either way."""

    input_ids: torch.Tensor  # [B, S] long
    loss_mask: torch.Tensor  # [B, S] float
    lengths: torch.Tensor  # [B] long
    anchors: torch.Tensor  # [B, N] long, sorted per row
    valid: torch.Tensor  # [B, N] bool

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return (self.input_ids, self.loss_mask, self.lengths, self.anchors, self.valid)


def host_draft_inputs(batch: Batch, config: TrainConfig, pin: bool) -> HostDraftInputs:
    """Anchors drawn on the CPU (no device op, no sync); ``pin``: page-locked for asynchronous copies."""
    generator = torch.Generator().manual_seed(config.seed * 1_000_003 + batch.index)
    anchors, valid = sample_anchors(batch.loss_mask, batch.lengths, config.objective.num_anchors, generator)
    host = HostDraftInputs(batch.input_ids, batch.loss_mask, batch.lengths, anchors, valid)
    return HostDraftInputs(*(t.pin_memory() for t in host.tensors())) if pin else host


def _device_draft_inputs(replica: Replica, config: TrainConfig, input_ids: torch.Tensor, loss_mask: torch.Tensor,
                         lengths: torch.Tensor, anchors: torch.Tensor, valid: torch.Tensor) -> DraftInputs:
    """Blocks and the block mask from device tensors: device ops only (what a drafter graph captures)."""
    objective = config.objective
    blocks = build_blocks(input_ids, loss_mask, lengths, anchors, valid, config.drafter.mask_token_id, objective)
    seq = input_ids.shape[1]
    if replica.model.flex is not None:
        mask = flex_block_mask(blocks.anchors, blocks.block_valid, seq, objective.block_size, objective.mask_build)
    else:
        mask = dense_block_mask(blocks.anchors, blocks.block_valid, seq, objective.block_size)
    return DraftInputs(blocks=blocks, mask=mask)


def draft_inputs(replica: Replica, batch: Batch, config: TrainConfig,
                 host: HostDraftInputs | None = None) -> DraftInputs:
    """Anchors (a function of seed and batch index), blocks and the block mask, on the replica's device."""
    host = host or host_draft_inputs(batch, config, pin=False)
    return _device_draft_inputs(replica, config, *(to_device(t, replica.device) for t in host.tensors()))


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
                             scenario: Scenario, loss_scale: float = 1.0, host: HostDraftInputs | None = None,
                             graphed: GraphedDrafter | None = None) -> LossParts:
    """Inputs, forward, weighted CE, backward of ``loss * loss_scale`` (gradients accumulate in the replica's
    parameters; 1 / accumulation steps, as the recipe scales). No host sync. ``graphed``: this thread's
    drafter graph (``--cuda-graphs all``); a failed capture falls back to the eager step below."""
    if graphed is not None:
        parts = graphed.step(hidden, host or host_draft_inputs(batch, config, pin=False))
        if parts is not None:
            if scenario.alloc_churn:
                churn_allocator(replica.device)
            return parts
    inputs = draft_inputs(replica, batch, config, host)
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


# --------------------------------------------------------------------------------------------------------
# The drafter step as one CUDA graph per drafter thread (--cuda-graphs all)
# --------------------------------------------------------------------------------------------------------


def drafter_graph_blocker(config: TrainConfig, scenario: Scenario, device: torch.device) -> str | None:
    """Why the drafter step cannot be one captured graph in this run (None: it can). Said in the banner."""
    checkpointed = config.checkpoint_layers or config.objective.loss == "chunked"
    if scenario.drafter_repeat > 1 or scenario.sync_per_chunk:
        return f"--scenario {scenario.name} changes the drafter step (a graph would hide what it reproduces)"
    if config.data.pad_to_longest:
        return "the batch width changes every step (padded to the longest sequence)"
    if checkpointed and config.objective.use_reentrant:
        return "reentrant activation checkpointing does not support torch.autograd.grad"
    if checkpointed and device.type == "cuda":
        return ("activation checkpointing reads the CUDA RNG state in the forward, which a capture cannot "
                "(use --checkpoint-layers false and a fused --loss)")
    return None


class GraphedDrafter:
    """One drafter thread's step as a CUDA graph, owned by that thread: the block inputs built on the device,
    forward, weighted CE, and the gradient of ``loss * loss_scale`` for every trainable parameter
    (``torch.autograd.grad``, so the graph *writes* the gradients instead of accumulating into whatever
    ``.grad`` held at capture). The scalars are copied out after each replay; the gradients stay in the graph's
    pool and are attached as ``.grad`` (accumulated by copy when ``--grad-accum`` > 1): the optimizer step that
    reads them is issued on this thread's stream before its next replay, which rewrites them."""

    def __init__(self, replica: Replica, config: TrainConfig, graphs: ThreadGraphs, loss_scale: float) -> None:
        self.replica, self.config, self.graphs, self.loss_scale = replica, config, graphs, loss_scale
        self.params = [p for p in replica.model.parameters() if p.requires_grad]
        self.attach = config.grad_accum == 1

    def _step(self, hidden: torch.Tensor, *host: torch.Tensor) -> tuple[Any, ...]:
        inputs = _device_draft_inputs(self.replica, self.config, *host)
        out = draft_forward(self.replica, hidden, inputs)
        parts = draft_loss(self.replica, out, inputs, self.config.objective)
        grads = torch.autograd.grad(parts.loss * self.loss_scale, self.params, allow_unused=True)
        return (parts.loss.detach(), parts.weight_sum.detach(), parts.correct, parts.trained, *grads)

    @staticmethod
    def _copy_out(outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (*(t.clone() for t in outputs[:4]), *outputs[4:])

    def step(self, hidden: torch.Tensor, host: HostDraftInputs) -> LossParts | None:
        """The step through this thread's graph (captured on first use); None when the capture failed."""
        device = self.replica.device
        values = (hidden, *host.tensors())
        key = ("drafter", tuple(hidden.shape), tuple(host.input_ids.shape))
        if key in self.graphs.failures:
            return None  # said once when the capture failed; this step runs eagerly
        if not self.graphs.has(key):
            example = tuple(v if v.device == device else to_device(v, device) for v in values)
            if not self.graphs.capture(key, self._step, example, self.config.graphs.warmup_iters):
                return None
        loss, weight_sum, correct, trained, *grads = self.graphs.replay(key, values, self._copy_out)
        for param, grad in zip(self.params, grads, strict=True):
            if grad is None:
                continue
            if param.grad is None:
                param.grad = grad if self.attach else grad.clone()
            else:
                param.grad.add_(grad)
        return LossParts(loss=loss, weight_sum=weight_sum, correct=correct, trained=trained)
