"""Drafter replicas and every CUDA stream/event rule of the trainer, in one place.

Each target thread and each drafter replica runs on a CUDA stream of its own, so a target forward overlaps
a drafter backward on the same GPU. Host threads are ordered by the queue and the barriers; the GPU
streams are not, so these rules order them with events (never a host sync):

1. Hand-off (target -> drafter): the producer records ``ready`` on its stream after the forward; the
   consumer's stream waits on it before touching the hidden states, and ``record_stream`` tells the caching
   allocator that the consumer's stream uses the producer's buffer. Across devices the peer copy runs on
   the *source* device's current stream of the consuming thread, so that stream is the one that waits, and
   the source buffer is recorded as used by it until the copy ends.
2. Gradient average (several replicas): each replica records ``backward_done``; the streams that read the
   gradients wait on all of them; every replica's stream waits on ``grads_averaged`` before its optimizer
   step and ``zero_grad`` (which frees the gradients a pending copy may still write).
3. End-of-run comparison: the main thread's streams wait for every replica's stream before reading.

All calls go through ``StreamOps`` so the ordering can be checked on CPU with a recording fake.
"""

from __future__ import annotations

import contextlib
import copy
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from reference_trainer.data import Batch
from reference_trainer.drafter import DFlashDraftModel
from reference_trainer.loss import flex_attention_fn

if TYPE_CHECKING:
    from reference_trainer.config import TrainConfig
    from reference_trainer.scenarios import Scenario
    from reference_trainer.target import FrozenTarget


class StreamOps:
    """The CUDA stream and event calls the rules use (the real ones; tests substitute a recording fake)."""

    def current_stream(self, device: torch.device) -> Any:
        return torch.cuda.current_stream(device)

    def new_event(self) -> Any:
        return torch.cuda.Event()

    def record(self, event: Any, stream: Any) -> None:
        event.record(stream)

    def wait_event(self, stream: Any, event: Any) -> None:
        stream.wait_event(event)

    def wait_stream(self, stream: Any, other: Any) -> None:
        stream.wait_stream(other)

    def record_stream(self, tensor: torch.Tensor, stream: Any) -> None:
        tensor.record_stream(stream)

    def copy_to(self, tensor: torch.Tensor, source: torch.device, device: torch.device) -> torch.Tensor:
        """Async copy of ``tensor`` (on ``source``) to ``device``. Between two CUDA devices PyTorch issues it on
        the *source* device's current stream of this thread, and makes the destination's current stream wait."""
        # To the CPU the copy must be complete before the host reads it: blocking (a SYNC, CUDA -> CPU only).
        return tensor.to(device, non_blocking=device.type == "cuda")


CUDA = StreamOps()


@dataclass(frozen=True)
class Replica:
    """One drafter thread's copy of the drafter, its optimiser, the frozen embedding/lm_head and its stream."""

    rank: int
    device: torch.device
    model: DFlashDraftModel
    embed_weight: torch.Tensor
    lm_head_weight: torch.Tensor
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LambdaLR
    forward: Callable[..., torch.Tensor]  # the (maybe compiled) drafter forward
    stream: Any  # torch.cuda.Stream on CUDA, None on CPU


@dataclass
class HiddenBatch:
    """One q_hs item: the batch, the target's hidden states, and the CUDA event that marks them ready."""

    batch: Batch
    hidden: torch.Tensor  # [B, S, n_tapped * H] on ``device``
    device: torch.device  # where ``hidden`` lives (the producing target's device)
    ready: Any  # torch.cuda.Event recorded on the producing stream; None on CPU
    producer: str
    host: Any = None  # step.HostDraftInputs the producer prepared (anchors drawn, pinned), or None


# --------------------------------------------------------------------------------------------------------
# Building replicas
# --------------------------------------------------------------------------------------------------------


def lr_factor(warmup: int, total: int, min_ratio: float) -> Callable[[int], float]:
    """The recipe's schedule as a factor of lr: linear warm-up (step+1)/warmup, then cosine from 1 down to
    ``min_ratio`` at step ``total`` (and flat after it)."""

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(1, total - warmup))
        return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))

    return factor


def attention_for(device: torch.device, config: TrainConfig, scenario: Scenario) -> str:
    attention = config.objective.attention
    if attention == "auto":
        attention = "flex" if device.type == "cuda" else "sdpa"
    if scenario.eager_flex and device.type == "cuda":  # flex has no CPU backward: CUDA only
        attention = "flex-eager"
    return attention


def make_replica(rank: int, device: torch.device, template: DFlashDraftModel, config: TrainConfig,
                 scenario: Scenario, targets: dict[str, FrozenTarget]) -> Replica:
    model = copy.deepcopy(template).to(device)
    source = targets.get(str(device), next(iter(targets.values())))
    # The drafter reuses the target's frozen embedding and lm_head: shared on the same device, copied otherwise.
    embed = source.embed_weight if source.device == device else source.embed_weight.to(device)
    lm_head = source.lm_head_weight if source.device == device else source.lm_head_weight.to(device)
    attention = attention_for(device, config, scenario)
    model.flex = None if attention == "sdpa" else flex_attention_fn(compiled=attention == "flex")
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay,
                                  betas=config.adam_betas, fused=config.fused_adamw or None)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lr_factor(config.warmup, config.schedule_steps, config.min_lr_ratio))
    forward: Callable[..., torch.Tensor] = model
    if config.compile_layers:
        for layer in model.layers:  # in place: parameter names (the checkpoint's keys) do not change
            layer.compile(backend=config.compile_backend, dynamic=False)
        if model.flex is not None:
            model.flex = flex_attention_fn(compiled=False)  # compiled as part of each layer's graph
    if config.compile:
        if model.flex is not None:
            model.flex = flex_attention_fn(compiled=False)  # compiled as part of the drafter graph
        forward = torch.compile(model, backend=config.compile_backend, dynamic=False)
    stream = torch.cuda.Stream(device) if device.type == "cuda" else None
    return Replica(rank=rank, device=device, model=model, embed_weight=embed, lm_head_weight=lm_head,
                   optimizer=optimizer, scheduler=scheduler, forward=forward, stream=stream)


@contextlib.contextmanager
def use_stream(device: torch.device, stream: Any) -> Iterator[None]:
    """Make ``stream`` this thread's current stream on ``device`` (nothing on CPU)."""
    if device.type != "cuda":
        yield
        return
    torch.cuda.set_device(device)
    with torch.cuda.stream(stream):
        yield


# --------------------------------------------------------------------------------------------------------
# Rule 1: the hand-off through q_hs
# --------------------------------------------------------------------------------------------------------


def mark_ready(device: torch.device, ops: StreamOps = CUDA) -> Any:
    """Producer side: an event on this thread's stream after the forward (None on CPU). No sync."""
    if device.type != "cuda":
        return None
    event = ops.new_event()
    ops.record(event, ops.current_stream(device))
    return event


def receive_hidden(item: HiddenBatch, device: torch.device, ops: StreamOps = CUDA) -> torch.Tensor:
    """Consumer side: the hidden states on ``device``, safe to use on this thread's current stream. No sync.

    Same device: this thread's stream waits on ``ready`` and is recorded as a user of the producer's buffer.
    Another device: the peer copy runs on this thread's current stream *of the source device* (PyTorch's
    rule), so that stream waits on ``ready`` before the copy is issued, and the source buffer is recorded as
    used by it: the producer drops its reference at once, and without ``record_stream`` the allocator could
    hand the memory to the producer's next batch while the copy still reads it."""
    if item.ready is None:  # produced on the CPU: an ordinary (host-ordered) copy
        return ops.copy_to(item.hidden, item.device, device)
    if item.device == device:
        consumer = ops.current_stream(device)
        ops.wait_event(consumer, item.ready)  # GPU-side wait, no host sync
        ops.record_stream(item.hidden, consumer)
        return item.hidden
    copy_stream = ops.current_stream(item.device)
    ops.wait_event(copy_stream, item.ready)
    hidden = ops.copy_to(item.hidden, item.device, device)  # the destination's stream waits for it (PyTorch)
    ops.record_stream(item.hidden, copy_stream)
    return hidden


# --------------------------------------------------------------------------------------------------------
# Rule 2: the gradient average
# --------------------------------------------------------------------------------------------------------


def mark_backward_done(replica: Replica, replicas: int, ops: StreamOps = CUDA) -> Any:
    """An event after this replica's backward, when another replica will read its gradients."""
    if replica.device.type != "cuda" or replicas < 2:
        return None
    event = ops.new_event()
    ops.record(event, ops.current_stream(replica.device))  # no sync: the averaging stream waits on it
    return event


@torch.no_grad()
def average_gradients(replicas: Sequence[Replica], backward_done: Sequence[Any],
                      ops: StreamOps = CUDA) -> list[Any]:
    """Average every replica's gradients into all replicas (drafter-0's thread, between the barriers).

    Returns the ``grads_averaged`` events every replica's stream waits on before its optimizer step."""
    lead = replicas[0]
    for replica, done in zip(replicas, backward_done, strict=True):
        if done is not None:
            # Cross-device copies run on the source device's current stream (of this thread), so that
            # stream must wait too.
            ops.wait_event(ops.current_stream(replica.device), done)
            ops.wait_event(ops.current_stream(lead.device), done)
    params = [list(r.model.parameters()) for r in replicas]
    for index in range(len(params[0])):
        grads = [p[index].grad for p in params]
        if any(g is None for g in grads):
            continue  # same on every replica (same code path): nothing to average
        mean = torch.stack([ops.copy_to(g, r.device, lead.device) for g, r in zip(grads, replicas, strict=True)]).mean(0)
        for p in params:
            p[index].grad.copy_(mean)
    events = []
    for device in sorted({r.device for r in replicas if r.device.type == "cuda"}, key=str):
        event = ops.new_event()
        ops.record(event, ops.current_stream(device))  # no sync: replicas' streams wait on these
        events.append(event)
    return events


def optimizer_step(replica: Replica, grads_averaged: Sequence[Any], grad_clip: float,
                   ops: StreamOps = CUDA) -> None:
    for event in grads_averaged:
        ops.wait_event(ops.current_stream(replica.device), event)  # GPU-side wait for the average
    # clip_grad_norm_ returns the norm as a device tensor: no host sync unless someone reads it.
    torch.nn.utils.clip_grad_norm_(replica.model.parameters(), grad_clip)
    replica.optimizer.step()
    replica.scheduler.step()
    replica.optimizer.zero_grad(set_to_none=True)


# --------------------------------------------------------------------------------------------------------
# Rule 3: comparing replicas at the end
# --------------------------------------------------------------------------------------------------------


@torch.no_grad()
def replica_max_abs_diff(replicas: Sequence[Replica], ops: StreamOps = CUDA) -> float:
    """Largest parameter difference between any drafter replica and replica 0 (0.0: identical).

    Called from the main thread after the drafter threads ended, while their last optimizer steps may still
    run on the replicas' streams: this thread's stream on each replica's device first waits for that
    replica's stream (the copy to replica 0's device runs on it, the comparison on replica 0's device's).
    Copies each replica's parameters to replica 0's device: a device sync, done once at the end of a run."""
    for replica in replicas:
        if replica.stream is not None:
            ops.wait_stream(ops.current_stream(replica.device), replica.stream)
    lead = replicas[0].model.state_dict()
    lead_device = replicas[0].device
    worst = 0.0
    for replica in replicas[1:]:
        for name, value in replica.model.state_dict().items():
            diff = (ops.copy_to(value, replica.device, lead_device).float() - lead[name].float()).abs().max()
            worst = max(worst, float(diff))  # host sync (once per tensor, end of run only)
    return worst
