"""The probes' readings as flat, labelled numbers: one catalogue for every export (wandb, Prometheus, traces).

A board document (docs/board.md) holds nested per-probe payloads; dashboards want flat series. This module
turns the ``probes`` and ``session`` sections of a board into :class:`Reading` values (a name from
:data:`CATALOGUE`, labels such as the queue or the CUDA device, and a finite float), and names them for
each sink: ``dflash/queue/q_hs/depth`` in wandb, ``dflash_queue_depth{queue="q_hs"}`` in Prometheus.

It also holds the one check of a *critical* finding that a process can make about itself from its own
board (:func:`critical_alerts`): the probes raise a ``wandb.alert`` from it. The full rule set lives in
``dflash_diag.analysis.findings``; the probes cannot import it (the layer rule: probes are stdlib + torch),
so this check mirrors the critical rule that reads only the board (``checkpoint-grad-none``), and a test
holds the two to the same verdicts on the same boards.

Standard library only: the Prometheus exporter (``dflash-diag export``) uses it on boards it reads from disk.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from dflash_contract.board import (
    STATUS_OK,
    AllocatorKeys,
    CheckpointKeys,
    CodedriftKeys,
    CollectivesKeys,
    CompileKeys,
    CudagraphsKeys,
    FastpathKeys,
    GilKeys,
    HealthKeys,
    PayloadKeys,
    ProbeName,
    QueueKeys,
    SessionKeys,
    SyncKeys,
)
from dflash_contract.health import judge, stuck_share

GAUGE = "gauge"
COUNTER = "counter"  # monotonically increasing over the life of the process

# name -> (kind, labels, help). Names are ``<group>_<field>`` with the unit as suffix (docs/integrations.md).
CATALOGUE: dict[str, tuple[str, tuple[str, ...], str]] = {
    # queues: the pipeline's stage waits. A producer blocked in put is starved downstream (the consumer is the
    # bottleneck); a consumer blocked in get is starved upstream.
    "queue_depth": (GAUGE, ("queue",), "items in the watched queue at publish time"),
    "queue_maxsize": (GAUGE, ("queue",), "the queue's bound (0: unbounded)"),
    "queue_put_blocked_share": (GAUGE, ("queue",), "share of the window producers spent blocked in put (0..1)"),
    "queue_get_blocked_share": (GAUGE, ("queue",), "share of the window consumers spent blocked in get (0..1)"),
    "queue_puts_per_s": (GAUGE, ("queue",), "items put per second over the last publish window"),
    "queue_gets_per_s": (GAUGE, ("queue",), "items got per second over the last publish window"),
    # gil
    "gil_wait_mean_ms": (GAUGE, (), "mean lateness of a waking thread getting the GIL back (ms)"),
    "gil_wait_p99_ms": (GAUGE, (), "99th percentile GIL wait of the knocker thread (ms)"),
    "gil_contention_share": (GAUGE, (), "share of wall time a waking thread waits for the GIL (0..1)"),
    # compile
    "compile_compiles": (COUNTER, (), "torch.compile frame compilations"),
    "compile_recompiles": (COUNTER, (), "recompilations (guard failures)"),
    "compile_graph_breaks": (COUNTER, (), "graph breaks"),
    "compile_recompile_limit_hits": (COUNTER, (), "frames that hit the recompile limit and now run eagerly"),
    "compile_failed_compiles": (COUNTER, (), "compilations that raised"),
    "compile_time_s": (COUNTER, (), "seconds spent compiling"),
    "compile_compiling_now": (GAUGE, (), "1 while a compilation is in progress"),
    # cudagraphs
    "cudagraph_captures": (COUNTER, (), "CUDA graph captures (recordings)"),
    "cudagraph_skips": (COUNTER, (), "compiled graphs that skipped CUDA graphs"),
    "cudagraph_rerecords": (COUNTER, (), "CUDA graphs recorded again for the same compile id"),
    "cudagraph_replays": (COUNTER, (), "CUDA graph tree replays"),
    # allocator (per CUDA device)
    "allocator_device_alloc_per_s": (GAUGE, ("device",), "cudaMalloc calls per second (allocator churn)"),
    "allocator_device_free_per_s": (GAUGE, ("device",), "cudaFree calls per second (allocator churn)"),
    "allocator_alloc_retries": (COUNTER, ("device",), "allocations retried after freeing the cache"),
    "allocator_ooms": (COUNTER, ("device",), "out-of-memory errors"),
    "allocator_allocated_bytes": (GAUGE, ("device",), "bytes allocated by tensors"),
    "allocator_reserved_bytes": (GAUGE, ("device",), "bytes reserved by the caching allocator"),
    "allocator_reserved_swing_bytes": (GAUGE, ("device",), "max - min reserved bytes over the window"),
    "allocator_fragmentation_share": (GAUGE, ("device",), "inactive split bytes / reserved bytes (0..1)"),
    "allocator_empty_cache_calls": (COUNTER, (), "torch.cuda.empty_cache() calls"),
    # checkpoint
    "checkpoint_reentrant_calls": (COUNTER, (), "activation-checkpoint calls with use_reentrant=True"),
    "checkpoint_non_reentrant_calls": (COUNTER, (), "activation-checkpoint calls with use_reentrant=False"),
    "checkpoint_grad_none_params": (GAUGE, (), "trainable parameters whose .grad was None after a backward"),
    "checkpoint_trainable_params": (GAUGE, (), "trainable parameters checked"),
    "checkpoint_mixed_modes": (GAUGE, (), "1 when both use_reentrant modes are in use"),
    # fastpath
    "fastpath_fallback": (GAUGE, (), "1 when a slow fallback path (torch GatedDeltaNet, eager flex_attention) runs"),
    # codedrift
    "codedrift_stale_modules": (GAUGE, (), "imported modules whose source changed on disk since the import"),
    # syncs
    "syncs": (COUNTER, (), "host<->device syncs torch reported since the probe armed (sync debug mode)"),
    "syncs_per_s": (GAUGE, (), "host<->device syncs per second since the previous publish"),
    # health (per optimizer parameter group "<Optimizer>#<n>/<group>")
    "health_lr": (GAUGE, ("group",), "learning rate of the group at the last sampled step"),
    "health_grad_none": (GAUGE, ("group",), "tensors of the group whose .grad was None at the sampled step"),
    "health_grad_nonfinite": (GAUGE, ("group",), "tensors of the group with a NaN/inf gradient at the sampled step"),
    "health_update_ratio": (GAUGE, ("group",), "|dw|/|w| of the group's watched weights since the previous sample"),
    "health_stuck_tensors": (GAUGE, ("group",), "watched tensors of the group that have not trained for 10+ steps"),
    "health_stuck_share": (GAUGE, ("group",), "share of the group's watched weights (elements) that do not train"),
    "health_frozen": (GAUGE, ("group",), "tensors of the group that do not require grad"),
    "health_amp_skipped": (COUNTER, (), "sampled steps a GradScaler skipped inside a fused optimizer"),
    "health_loss": (GAUGE, (), "the loss handed to backward() at the last sampled step"),
    "health_steps": (COUNTER, (), "optimizer steps seen by the health probe"),
    "health_sample_ms": (GAUGE, (), "mean cost of one health sample to the step it runs in (ms)"),
    # collectives (a rank of a torch.distributed job; labelled with its rank)
    "collectives_entered": (COUNTER, ("rank",), "torch.distributed collective calls entered"),
    "collectives_completed": (COUNTER, ("rank",), "collective calls returned from"),
    "collectives_async_issued": (COUNTER, ("rank",), "collective calls made with async_op=True"),
    "collectives_in_collectives_s": (COUNTER, ("rank",), "seconds spent inside collective calls"),
    # the probe session itself
    "probes_steps": (COUNTER, (), "session.step() calls the program made"),
    "probes_step": (GAUGE, (), "the training step the program last passed to session.step()"),
    "probes_publish_cost_ms": (GAUGE, (), "mean wall time of one board publish (ms)"),
    "probes_publish_errors": (COUNTER, (), "board publishes that failed"),
}


@dataclass(frozen=True, slots=True)
class Reading:
    name: str  # a CATALOGUE key
    value: float
    labels: tuple[tuple[str, str], ...] = ()

    @property
    def wandb_key(self) -> str:
        """``dflash/<group>[/<label values>]/<field>``: wandb groups charts by the first path component."""
        group, _, field = self.name.partition("_")
        middle = "".join(f"/{_key_safe(v)}" for _, v in self.labels)
        return f"dflash/{group}{middle}/{field}"


@dataclass(frozen=True, slots=True)
class Alert:
    rule_id: str  # the id dflash_diag's rules give the same finding (docs/findings.md)
    title: str
    text: str


def _key_safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)[:64] or "_"


def _num(payload: Mapping[str, Any] | None, key: str) -> float | None:
    value = payload.get(key) if isinstance(payload, Mapping) else None
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int) and abs(value) <= 2**63:  # a 401-digit integer has no float (OverflowError)
        return float(value)
    if isinstance(value, float) and math.isfinite(value):
        return value
    return None


def _ok(probes: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    payload = probes.get(name)
    return payload if isinstance(payload, Mapping) and payload.get(PayloadKeys.STATUS) == STATUS_OK else None


def _fields(payload: Mapping[str, Any] | None, pairs: tuple[tuple[str, str], ...],
            labels: tuple[tuple[str, str], ...] = ()) -> Iterator[Reading]:
    for name, key in pairs:
        value = _num(payload, key)
        if value is not None:
            yield Reading(name, value, labels)


# (catalogue name, payload key) per payload: the keys are the contract's constants, so a renamed key renames the
# series' source too (tests/contract/test_board_contract.py scans this module like every other).
_QUEUE_FIELDS = (("queue_depth", QueueKeys.DEPTH), ("queue_maxsize", QueueKeys.MAXSIZE),
                 ("queue_put_blocked_share", QueueKeys.PUT_BLOCKED_SHARE),
                 ("queue_get_blocked_share", QueueKeys.GET_BLOCKED_SHARE),
                 ("queue_puts_per_s", QueueKeys.PUTS_PER_S), ("queue_gets_per_s", QueueKeys.GETS_PER_S))
_GIL_FIELDS = (("gil_wait_mean_ms", GilKeys.WAIT_MEAN_MS), ("gil_wait_p99_ms", GilKeys.WAIT_P99_MS),
               ("gil_contention_share", GilKeys.CONTENTION_SHARE))
_COMPILE_FIELDS = (("compile_compiles", CompileKeys.COMPILES), ("compile_recompiles", CompileKeys.RECOMPILES),
                   ("compile_graph_breaks", CompileKeys.GRAPH_BREAKS),
                   ("compile_recompile_limit_hits", CompileKeys.RECOMPILE_LIMIT_HITS),
                   ("compile_failed_compiles", CompileKeys.FAILED_COMPILES),
                   ("compile_time_s", CompileKeys.COMPILE_TIME_S), ("compile_compiling_now", CompileKeys.COMPILING_NOW))
_CUDAGRAPH_FIELDS = (("cudagraph_captures", CudagraphsKeys.CAPTURES), ("cudagraph_skips", CudagraphsKeys.SKIPS),
                     ("cudagraph_rerecords", CudagraphsKeys.RERECORDS), ("cudagraph_replays", CudagraphsKeys.REPLAYS))
_ALLOCATOR_FIELDS = (("allocator_device_alloc_per_s", AllocatorKeys.DEVICE_ALLOC_PER_S),
                     ("allocator_device_free_per_s", AllocatorKeys.DEVICE_FREE_PER_S),
                     ("allocator_alloc_retries", AllocatorKeys.ALLOC_RETRIES), ("allocator_ooms", AllocatorKeys.OOMS),
                     ("allocator_allocated_bytes", AllocatorKeys.ALLOCATED_BYTES),
                     ("allocator_reserved_bytes", AllocatorKeys.RESERVED_BYTES),
                     ("allocator_reserved_swing_bytes", AllocatorKeys.RESERVED_SWING_BYTES),
                     ("allocator_fragmentation_share", AllocatorKeys.FRAGMENTATION_SHARE))
_CHECKPOINT_FIELDS = (("checkpoint_grad_none_params", CheckpointKeys.GRAD_NONE_COUNT),
                      ("checkpoint_trainable_params", CheckpointKeys.TRAINABLE_PARAMS),
                      ("checkpoint_mixed_modes", CheckpointKeys.MIXED_MODES))
_CHECKPOINT_CALL_FIELDS = (("checkpoint_reentrant_calls", CheckpointKeys.REENTRANT),
                           ("checkpoint_non_reentrant_calls", CheckpointKeys.NON_REENTRANT))
_SESSION_FIELDS = (("probes_steps", SessionKeys.STEPS), ("probes_step", SessionKeys.STEP),
                   ("probes_publish_cost_ms", SessionKeys.PUBLISH_COST_MS_MEAN),
                   ("probes_publish_errors", SessionKeys.PUBLISH_ERRORS))
_HEALTH_GROUP_FIELDS = (("health_lr", HealthKeys.LR), ("health_grad_none", HealthKeys.GRAD_NONE),
                        ("health_grad_nonfinite", HealthKeys.GRAD_NONFINITE),
                        ("health_update_ratio", HealthKeys.UPDATE_RATIO),
                        ("health_stuck_tensors", HealthKeys.STUCK_TENSORS), ("health_frozen", HealthKeys.FROZEN))
_HEALTH_FIELDS = (("health_loss", HealthKeys.LOSS), ("health_steps", HealthKeys.STEPS),
                  ("health_sample_ms", HealthKeys.SAMPLE_MS_MEAN), ("health_amp_skipped", HealthKeys.AMP_SKIPPED))
_RESERVED = frozenset({PayloadKeys.STATUS, PayloadKeys.REASON, PayloadKeys.ERRORS, PayloadKeys.HOOK_ERRORS,
                       PayloadKeys.LAST_HOOK_ERROR})  # keys of the queues payload that are not a queue
_COLLECTIVES_FIELDS = (("collectives_entered", CollectivesKeys.ENTERED),
                       ("collectives_completed", CollectivesKeys.COMPLETED),
                       ("collectives_async_issued", CollectivesKeys.ASYNC_ISSUED),
                       ("collectives_in_collectives_s", CollectivesKeys.IN_COLLECTIVES_S))


def readings(probes: Mapping[str, Any], session: Mapping[str, Any] | None = None) -> list[Reading]:
    """Every catalogued number found in a board's ``probes`` (and ``session``) sections; absent ones are skipped."""
    out: list[Reading] = []
    queues = _ok(probes, ProbeName.QUEUES)
    if queues is not None:
        for name, payload in sorted(queues.items()):
            if name not in _RESERVED and isinstance(payload, Mapping):
                out.extend(_fields(payload, _QUEUE_FIELDS, (("queue", str(name)),)))
    out.extend(_fields(_ok(probes, ProbeName.GIL), _GIL_FIELDS))
    out.extend(_fields(_ok(probes, ProbeName.COMPILE), _COMPILE_FIELDS))
    out.extend(_fields(_ok(probes, ProbeName.CUDAGRAPHS), _CUDAGRAPH_FIELDS))
    allocator = _ok(probes, ProbeName.ALLOCATOR)
    if allocator is not None:
        devices = allocator.get(AllocatorKeys.DEVICES)
        if isinstance(devices, Mapping):
            for device, payload in sorted(devices.items(), key=lambda kv: str(kv[0])):
                out.extend(_fields(payload, _ALLOCATOR_FIELDS, (("device", f"cuda:{device}"),)))
        out.extend(_fields(allocator, (("allocator_empty_cache_calls", AllocatorKeys.EMPTY_CACHE_CALLS),)))
    checkpoint = _ok(probes, ProbeName.CHECKPOINT)
    if checkpoint is not None:
        calls = checkpoint.get(CheckpointKeys.CALLS)
        out.extend(_fields(calls if isinstance(calls, Mapping) else None, _CHECKPOINT_CALL_FIELDS))
        out.extend(_fields(checkpoint, _CHECKPOINT_FIELDS))
    out.extend(_fields(_ok(probes, ProbeName.FASTPATH), (("fastpath_fallback", FastpathKeys.FALLBACK),)))
    out.extend(_fields(_ok(probes, ProbeName.CODEDRIFT), (("codedrift_stale_modules", CodedriftKeys.STALE_COUNT),)))
    out.extend(_fields(_ok(probes, ProbeName.SYNCS), (("syncs", SyncKeys.TOTAL), ("syncs_per_s", SyncKeys.PER_S))))
    health = _ok(probes, ProbeName.HEALTH)
    if health is not None:
        groups = health.get(HealthKeys.GROUPS)
        for group in groups if isinstance(groups, list) else ():
            if isinstance(group, Mapping) and isinstance(group.get(HealthKeys.GROUP), str):
                labels = (("group", group[HealthKeys.GROUP]),)
                out.extend(_fields(group, _HEALTH_GROUP_FIELDS, labels))
                out.extend(_fields({"share": stuck_share(group)}, (("health_stuck_share", "share"),), labels))
        out.extend(_fields(health, _HEALTH_FIELDS))
    collectives = _ok(probes, ProbeName.COLLECTIVES)
    if collectives is not None:
        rank = collectives.get(CollectivesKeys.RANK)
        label = (("rank", str(rank) if isinstance(rank, int) and not isinstance(rank, bool) else ""),)
        out.extend(_fields(collectives, _COLLECTIVES_FIELDS, label))
    if isinstance(session, Mapping):
        out.extend(_fields(session, _SESSION_FIELDS))
    return out


def wandb_metrics(probes: Mapping[str, Any], session: Mapping[str, Any] | None = None) -> dict[str, float]:
    """``{"dflash/queue/q_hs/depth": 3.0, ...}``: the readings keyed for ``run.log``."""
    return {r.wandb_key: r.value for r in readings(probes, session)}


def critical_alerts(probes: Mapping[str, Any], now_wall_s: float | None = None) -> list[Alert]:
    """The critical findings a process can tell from its own board (the rule ids of docs/findings.md)."""
    out: list[Alert] = []
    checkpoint = _ok(probes, ProbeName.CHECKPOINT)
    count = _num(checkpoint, CheckpointKeys.GRAD_NONE_COUNT) or 0.0
    names = checkpoint.get(CheckpointKeys.GRAD_NONE_PARAMS) if checkpoint is not None else None
    names = [n for n in names if isinstance(n, str)] if isinstance(names, list) else []
    if not count and names:
        count = float(len(names))
    if count > 0 and checkpoint is not None:
        trainable = _num(checkpoint, CheckpointKeys.TRAINABLE_PARAMS)
        calls = checkpoint.get(CheckpointKeys.CALLS) if isinstance(checkpoint.get(CheckpointKeys.CALLS), Mapping) else {}
        reentrant = _num(calls, CheckpointKeys.REENTRANT) or 0.0
        cause = ("use_reentrant=True checkpoints pass no gradient to these parameters" if reentrant > 0
                 else "their gradients never arrive (frozen by mistake, unused, or cut from the graph)")
        of = f" of {trainable:.0f}" if trainable else ""
        example = f" (e.g. {', '.join(names[:3])})" if names else ""
        out.append(Alert(
            rule_id="checkpoint-grad-none",
            title=f"{count:.0f} trainable parameters get no gradient",
            text=f"{count:.0f}{of} trainable parameters had .grad None after a backward{example}: {cause}. "
                 "Training is silently updating only part of the model. Fix: use_reentrant=False "
                 "(or pass the tensors positionally to the checkpointed function). `dflash-diag doctor PID` explains.",
        ))
    # The health verdicts are judged by the one function doctor's health rules use.
    for verdict in judge(_ok(probes, ProbeName.HEALTH), now_wall_s if now_wall_s is not None else time.time()):
        if verdict.critical:
            out.append(Alert(rule_id=verdict.rule_id, title=verdict.claim[:80], text=f"{verdict.claim}. Fix: "
                             f"{verdict.remedy} `dflash-diag doctor PID` explains."))
    return out
