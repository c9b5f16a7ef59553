"""Gradient reductions made once per micro-batch of a gradient accumulation instead of once per optimizer step: every
backward is followed by an ``all_reduce`` (often one per tensor), so an accumulation over N micro-batches moves the
gradients N times and waits on the peers (and, with gloo on CUDA tensors, on device-to-host copies) N times for one
update. DDP's ``no_sync()`` exists for this; hand-written averaging loops often miss it.

Two sources, each with its cost:

- the ``collectives`` probe's calls per operation and the time inside them, against the ``health`` probe's optimizer
  steps and ``backward()`` calls over the window's boards: reduction calls per optimizer step at least as many as
  the backward calls, over at least two backward calls a step, is once per micro-batch (or more);
- from the stack samples, outside or under probes: the training thread inside a reduction (``all_reduce``,
  ``reduce_scatter``...), called (directly or through the program's helper) from a line whose innermost loop runs
  ``backward()`` while the optimizer's ``step()`` is outside that loop (the source file on disk, ``SourceLine``'s
  loop facts). A reduction called from the loop that also steps is once per step: not this.

The cost is the share of the window inside those reductions (probe) or of the thread's samples (one-sigma lower
bound): a warning from 15%, information below. Reductions inside a module's forward or backward (tensor parallelism,
FSDP's all-gathers) are not gradient averaging and are never counted from the stacks; the probe path counts only
reductions, and only when the process accumulates gradients (backward calls outnumber steps).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from dflash_contract.board import CollectivesKeys, HealthKeys, ProbeName
from dflash_diag.analysis.collectives import collective_op
from dflash_diag.analysis.findings._context import Context, frame_site, lower_bound, num, pct, sub
from dflash_diag.analysis.findings._registry import RuleSpec
from dflash_diag.model import PIPELINE_STAGES, Finding, Severity, ThreadStats
from dflash_diag.model.evidence import is_library_file
from dflash_diag.model.stacks import ThreadSample

# The collectives that average gradients (DDP's reducer, hand-written averaging, FSDP's reduce-scatter).
REDUCTIONS = frozenset({"all_reduce", "all_reduce_coalesced", "reduce_scatter", "reduce_scatter_tensor",
                        "reduce_scatter_coalesced", "reduce"})
# A sixth of the window (or of the training thread's samples, lower bound) inside per-micro-batch reductions: the
# same bar as host syncs and copies. Below, information from MIN_SHARE.
COST_SHARE = 0.15
MIN_SHARE = 0.05
MIN_BACKWARDS_PER_STEP = 2.0  # a gradient accumulation: more than one backward per optimizer step
MIN_WINDOW_S = 1.0
# A thread in a reduction at nearly every sample is parked in one, not making one per micro-batch: a hang or a wait
# on a slow peer, which collective-hang and rank-straggler judge with every rank's view.
MAX_SAMPLED_SHARE = 0.95
# Frames that mean the reduction runs inside a module's forward or autograd's backward (tensor parallelism, FSDP's
# hooks): part of the model's math, not gradient averaging by the loop.
_INSIDE_MODEL = ("torch/nn/modules/module.py", "torch/autograd/", "torch/distributed/fsdp/",
                 "torch/nn/parallel/distributed.py")

RULES = (RuleSpec("collective-per-microstep", sampled=True),)


@dataclass(frozen=True, slots=True)
class _Counted:
    calls_per_step: float
    backwards_per_step: float
    op: str
    share: float  # of the window inside those reductions
    window_s: float


@dataclass(frozen=True, slots=True)
class _Sampled:
    stats: ThreadStats
    share: float
    bound: float
    op: str
    site: str  # the program's call inside the micro-batch loop
    loop: str  # the loop's line
    samples: int


def check(ctx: Context) -> Iterator[Finding]:
    counted = _from_probes(ctx)
    sampled = _from_samples(ctx)
    if counted is None and sampled is None:
        return
    share = max(counted.share if counted else 0.0, sampled.bound if sampled else 0.0)
    if share < MIN_SHARE:
        return
    who = sampled.stats.name if sampled is not None else "the training loop"
    op = counted.op if counted is not None else sampled.op if sampled is not None else "all_reduce"
    evidence: list[tuple[str, str]] = []
    if counted is not None:
        what = (f"{counted.calls_per_step:.0f} {op} calls per optimizer step over {counted.backwards_per_step:.0f} "
                f"backward passes, {pct(counted.share)} of the window inside them")
        evidence += [(f"{op} calls per optimizer step", f"{counted.calls_per_step:.1f} (collectives probe)"),
                     ("backward() calls per optimizer step", f"{counted.backwards_per_step:.1f} (health probe)"),
                     ("time inside them", f"{pct(counted.share)} of {counted.window_s:.1f} s")]
    else:
        assert sampled is not None
        what = (f"{pct(sampled.share)} of its samples in {op} called at {sampled.site}, inside the loop at "
                f"{sampled.loop} that runs backward() while the optimizer steps outside it")
    if sampled is not None:
        evidence += [(f"{sampled.stats.name} in {sampled.op} per micro-batch",
                      f"{pct(sampled.share)} of its {sampled.stats.n_samples} samples (at least {pct(sampled.bound)})"),
                     ("called at", sampled.site), ("the micro-batch loop", sampled.loop)]
        if counted is not None:
            what += f"; {sampled.stats.name} is in them {pct(sampled.share)} of its samples, called at {sampled.site}"
    micro = counted.backwards_per_step if counted is not None else MIN_BACKWARDS_PER_STEP
    yield Finding(
        rule_id="collective-per-microstep",
        severity=Severity.WARNING if share >= COST_SHARE else Severity.INFO,
        claim=f"{who} reduces gradients after every micro-batch, not once per optimizer step: {what}",
        evidence=tuple(evidence),
        remedy="Reduce once per optimizer step: accumulate the micro-batches' gradients locally and all-reduce after "
               "the last one (DDP: `with model.no_sync():` around all but the last micro-batch), in one bucketed call "
               "(torch.cat of the gradients, or DDP's buckets) rather than one call per tensor.",
        impact=round(share * (1.0 - 1.0 / micro), 3),
        stages=(sampled.stats.stage,) if sampled is not None and sampled.stats.stage in PIPELINE_STAGES else (),
    )


def _from_probes(ctx: Context) -> _Counted | None:
    """Reductions per optimizer step and per backward over the window's boards (collectives + health probes)."""
    boards = ctx.obs.boards if isinstance(ctx.obs.boards, tuple) else ()
    readable = [b for b in boards if b.probe(ProbeName.COLLECTIVES) and b.probe(ProbeName.HEALTH)]
    if len(readable) < 2:
        return None
    first, last = readable[0], readable[-1]
    window_s = last.wall_time_s - first.wall_time_s
    if window_s < MIN_WINDOW_S:
        return None
    steps = _delta(first.probe(ProbeName.HEALTH), last.probe(ProbeName.HEALTH), HealthKeys.STEPS)
    backwards = _delta(first.probe(ProbeName.HEALTH), last.probe(ProbeName.HEALTH), HealthKeys.BACKWARDS)
    before = sub(first.probe(ProbeName.COLLECTIVES), CollectivesKeys.BY_OP)
    after = sub(last.probe(ProbeName.COLLECTIVES), CollectivesKeys.BY_OP)
    calls: Counter[str] = Counter()
    ms = 0.0
    for op in REDUCTIONS:
        now, then = after.get(op), before.get(op)
        if not isinstance(now, Mapping):
            continue
        then = then if isinstance(then, Mapping) else {}
        calls[op] += int(max(0.0, (num(now, CollectivesKeys.COUNT) or 0.0) - (num(then, CollectivesKeys.COUNT) or 0.0)))
        ms += max(0.0, (num(now, CollectivesKeys.TOTAL_MS) or 0.0) - (num(then, CollectivesKeys.TOTAL_MS) or 0.0))
    total = sum(calls.values())
    if steps is None or backwards is None or steps < 1 or not total:
        return None
    per_step, back_per_step = total / steps, backwards / steps
    if back_per_step < MIN_BACKWARDS_PER_STEP or total < backwards:
        return None  # no accumulation, or fewer reductions than backward passes: once per step is possible
    return _Counted(calls_per_step=per_step, backwards_per_step=back_per_step, op=calls.most_common(1)[0][0],
                    share=min(1.0, ms / 1e3 / window_s), window_s=window_s)


def _delta(first: Mapping[str, object] | None, last: Mapping[str, object] | None, key: str) -> float | None:
    a, b = num(first, key), num(last, key)
    return b - a if a is not None and b is not None else None


def _from_samples(ctx: Context) -> _Sampled | None:
    best: _Sampled | None = None
    for stats in ctx.sampled():
        rows = ctx.stats_rows(stats)
        if not rows:
            continue
        sites: Counter[tuple[str, str, str]] = Counter()
        for thread, _state in rows:
            found = _per_microstep_site(ctx, thread)
            if found is not None:
                sites[found] += 1
        if not sites:
            continue
        n = len(rows)
        share = sum(sites.values()) / n
        if share > MAX_SAMPLED_SHARE:
            continue
        (op, site, loop), _ = sites.most_common(1)[0]
        found = _Sampled(stats=stats, share=share, bound=lower_bound(share, n), op=op, site=site, loop=loop,
                         samples=sum(sites.values()))
        if best is None or found.bound > best.bound:
            best = found
    return best


def _per_microstep_site(ctx: Context, thread: ThreadSample) -> tuple[str, str, str] | None:
    """(op, the program's call, the loop's line) when the sample is in a gradient reduction called from a loop that
    runs backward() but not the optimizer's step; None otherwise."""
    op = collective_op(thread, ctx.obs.line_text)
    if op not in REDUCTIONS:
        return None
    frames = [f for f in thread.frames if not f.native]
    if any(any(marker in f.filename.replace("\\", "/") for marker in _INSIDE_MODEL) for f in frames):
        return None  # inside a module's forward or backward: the model's own collective
    for frame in frames:  # innermost first: the helper that calls the collective, then its callers
        if is_library_file(frame.filename):
            continue
        line = ctx.code.get((frame.filename, frame.line))
        if line is None or line.loop_line is None or not line.loop_backward:
            continue
        if line.loop_step:
            return None  # the loop that runs backward also steps: once per step
        return op, frame_site(frame), f"{frame.short_filename}:{line.loop_line}"
    return None
