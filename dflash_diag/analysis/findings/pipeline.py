"""Which stage of the producer -> queue -> consumer pipeline limits throughput (a symptom), and where its time goes;
and the one thread of a stage that is slower than its peers (a cause).

A stage verdict is a symptom: the linking pass (``analysis.causal``) attaches the causes that explain it. So
that a verdict without a cause still says something the user can act on, it always carries where the limiting
stage spends its time: its top functions in the program's own code (file:line, share of the stage's samples),
or, when its threads mostly wait outside the queue (a socket, a file, a lock, a sleep), where they wait.
"""

from __future__ import annotations

from collections.abc import Iterator

from dflash_contract.board import AppKeys
from dflash_diag.analysis.findings._context import (
    Context,
    known_mechanisms_text,
    libc_text,
    mean_share,
    pct,
    settings_text,
    stage_label,
    stage_role,
    sub,
    threads_text,
)
from dflash_diag.analysis.findings._registry import RuleSpec
from dflash_diag.analysis.hotspots import hot_functions, library_text, spots_text, wait_spots
from dflash_diag.analysis.native import native_text
from dflash_diag.analysis.sched import connection_churn_text
from dflash_diag.analysis.stages import SlowThread, slow_thread
from dflash_diag.model import PIPELINE_STAGES, Finding, Frame, Severity, Stage, ThreadState, ThreadStats
from dflash_diag.model.common import is_na
from dflash_diag.model.findings import CAUSE, SYMPTOM

# A stage that spends a fifth of its time blocked on the queue is waiting on the other stage, not on its
# own work: below that the pipeline is close enough to balanced that naming a bottleneck is noise.
STARVED_INFO_SHARE = 0.20
# Half of a stage's time blocked on the queue means half of its hardware idles: a measured cost, a warning --
# when that hardware is a GPU of its own. A CPU-only producer waiting for its consumer (a data loader) is the
# design; a GPU the two stages share keeps working for the other one.
STARVED_WARNING_SHARE = 0.50
# A queue filling by more than one item every 20 s is backing up (the seed's q_hs grew 0 -> 51 in minutes).
QUEUE_BACKING_UP_PER_S = 0.05
HOT_SHOWN = 3
# A limiting stage idle (outside the queue) in half of its samples is not computing: it waits for something
# else (its input source, a lock, a sleep), and that, not its compute, is what to fix.
WAITING_STAGE_SHARE = 0.50

_REMEDY = {  # formatted with the stages' names in this process (stage_role)
    Stage.DRAFTER: (
        "Speed up the {slow} stage where it spends its time (the functions above; the causes linked to this "
        "finding say why), or give it more threads/GPUs; a faster {other} stage will not help until then."
    ),
    Stage.TARGET: (
        "Speed up the {slow} stage where it spends its time (the functions above; the causes linked to this "
        "finding say why) or add {slow} threads/GPUs; the {other} stage is waiting for its input."
    ),
}

_WAITING_REMEDY = (
    "The {stage} threads wait at the lines above instead of computing: find what they wait for there (a network "
    "or disk read, a lock, a sleep, another process) and overlap or remove it (prefetch, more reader threads, a "
    "faster source); faster compute will not help until then."
)

RULES = (
    RuleSpec("pipeline-bottleneck-drafter", kind=SYMPTOM, sampled=True, stage_verdict=True),
    RuleSpec("pipeline-bottleneck-target", kind=SYMPTOM, sampled=True, stage_verdict=True),
    RuleSpec("stage-slow-thread", kind=CAUSE, sampled=True),
)


def check(ctx: Context) -> Iterator[Finding]:
    yield from _bottleneck(ctx)
    for stage in PIPELINE_STAGES:
        found = slow_thread(stage, [(t, ctx.stats_rows(t)) for t in ctx.threads if t.stage == stage])
        if found is not None:
            yield _slow_thread(ctx, found)


def _slow_thread(ctx: Context, slow: SlowThread) -> Finding:
    """One thread of a stage does what its peers do not: the stage's mean shares hide it, the headline names it."""
    spot = slow.spot
    peers = "where " + (f"{slow.peer} spends {pct(slow.peer_share)}" if len(slow.peers) == 1
                        else f"{threads_text(list(slow.peers))} spend at most {pct(slow.peer_share)}")
    claim = (f"{slow.thread} is the slow thread of {stage_label(ctx, slow.stage)}: {pct(spot.share)} of its time in "
             f"{spot.function} ({spot.site}), {peers}")
    job = next((t.entry for t in ctx.threads if t.name == slow.thread and t.entry is not None), None)
    evidence = [
        (f"{slow.thread} in {spot.function}", f"{pct(spot.share)} of its {slow.n_samples} samples, hottest at "
                                              f"{spot.site} ({pct(spot.line_share)})"),
        (f"{slow.peer} in {spot.function}", pct(slow.peer_share)),
    ]
    if job is not None:
        evidence.append(("the same job", f"{', '.join((slow.thread, *slow.peers))} run {job.name} "
                                         f"({job.short_filename})"))
    stats = next((t for t in ctx.threads if t.name == slow.thread), None)
    if stats is not None and not is_na(stats.cpu_pct):
        evidence.append((f"{slow.thread} CPU", f"{float(stats.cpu_pct):.0f}% of a core"))  # type: ignore[arg-type]
    return Finding(
        rule_id="stage-slow-thread",
        severity=Severity.INFO,
        claim=claim,
        evidence=tuple(evidence),
        remedy=(f"Make {spot.function} ({spot.site}) cheaper (vectorise a per-row Python loop, cache what it "
                f"recomputes) or move it off {slow.thread}'s loop (a thread of its own, every Nth batch): meanwhile "
                f"{slow.thread} takes fewer items than its peers and {stage_label(ctx, slow.stage)} runs below "
                f"{len(slow.peers) + 1} threads' worth."),
        # The stage loses about the extra share of one of its threads' time.
        impact=slow.excess / (len(slow.peers) + 1),
        kind=CAUSE,
        stages=(slow.stage,),
    )


def _bottleneck(ctx: Context) -> Iterator[Finding]:
    pipe = ctx.pipeline
    producer = None if is_na(pipe.producer_starved_share) else float(pipe.producer_starved_share)  # type: ignore[arg-type]
    consumer = None if is_na(pipe.consumer_starved_share) else float(pipe.consumer_starved_share)  # type: ignore[arg-type]
    trend = None if is_na(pipe.queue_trend_per_s) else float(pipe.queue_trend_per_s)  # type: ignore[arg-type]

    # The verdict names the stage (``analysis.pipeline``: by a margin beyond sampling noise, or the queue's fill);
    # a balanced pipeline has no bottleneck to claim, so one report never says "balanced" beside "X limits".
    bottleneck = Stage.of(pipe.bottleneck)
    if bottleneck not in PIPELINE_STAGES:
        return
    waiting_share = producer if bottleneck is Stage.DRAFTER else consumer
    backing_up = trend is not None and trend >= QUEUE_BACKING_UP_PER_S
    if (waiting_share is None or waiting_share < STARVED_INFO_SHARE) and not (bottleneck is Stage.DRAFTER and backing_up):
        return
    # Naming the slowest stage is information (some stage is always the slowest); it becomes a warning when
    # the other stage's GPU idles half of its time. A rising queue alone stays info: a small queue fills at start.
    other = bottleneck.other_side
    idle_gpu = _dedicated_gpus(ctx, other, bottleneck)
    severity = Severity.WARNING if (waiting_share or 0.0) >= STARVED_WARNING_SHARE and idle_gpu else Severity.INFO
    slow_stage = pipe.drafter if bottleneck is Stage.DRAFTER else pipe.target
    other_stage = pipe.target if bottleneck is Stage.DRAFTER else pipe.drafter

    wait_state = ThreadState.QUEUE_PUT if bottleneck is Stage.DRAFTER else ThreadState.QUEUE_GET
    wait_text = "blocked in put (queue full)" if bottleneck is Stage.DRAFTER else "blocked in get (queue empty)"
    reasons = []
    if waiting_share is not None and waiting_share >= STARVED_INFO_SHARE:
        reasons.append(f"{stage_role(ctx, other)} threads are {wait_text} {pct(waiting_share)} of the time")
    if bottleneck is Stage.DRAFTER and backing_up:
        reasons.append(f"{pipe.queue_name} backing up ({trend:+.2f} items/s)")
    rows = ctx.stage_rows(bottleneck)
    spots = hot_functions(rows, n=HOT_SHOWN)
    idle_share = sum(1 for _, state in rows if state is ThreadState.IDLE) / len(rows) if rows else 0.0
    waits = wait_spots(rows, n=HOT_SHOWN) if idle_share >= WAITING_STAGE_SHARE else ()
    slow, other_name = stage_role(ctx, bottleneck), stage_role(ctx, other)
    claim = f"{stage_label(ctx, bottleneck)} limits throughput: " + ", ".join(reasons)
    if waits:
        claim += (f"; its own threads are not computing: they wait (not on the queue) {pct(idle_share)} of the time, "
                  f"in {spots_text(waits)}") + connection_churn_text(ctx.obs)

    evidence: list[tuple[str, str]] = []
    if slow_stage.threads:
        evidence.append((f"{slow} threads", threads_text(list(slow_stage.threads))))
    if spots:
        # The hottest line's code: where no rule names a cause, the call the time goes to is what the user reads.
        text = (ctx.line_text(Frame(spots[0].function, spots[0].filename, spots[0].line)) or "").strip()
        tids = {t.os_thread_id for t, _ in rows if t.os_thread_id is not None}
        below = "; ".join(x for x in (native_text(ctx.obs.native, tids),
                                      libc_text(ctx, tids)) if x)
        evidence.append((f"{slow} spends its time in",
                         spots_text(spots) + (f" (hottest line `{text[:80]}`)" if text else "")
                         + library_text(rows) + (f"; {below}" if below else "")
                         + known_mechanisms_text(ctx, rows, tids) + settings_text(ctx, rows)))
    if waits:
        evidence.append((f"{slow} waits in", spots_text(waits)))
    if not is_na(pipe.queue_depth):
        maxsize = "" if is_na(pipe.queue_maxsize) else f" / {pipe.queue_maxsize}"
        evidence.append((f"{pipe.queue_name} depth", f"{pipe.queue_depth}{maxsize} items"))
    if trend is not None:
        evidence.append((f"{pipe.queue_name} trend", f"{trend:+.2f} items/s"))
    if producer is not None:
        evidence.append((f"{stage_role(ctx, Stage.TARGET)} blocked in put", pct(producer)))
    if consumer is not None:
        evidence.append((f"{stage_role(ctx, Stage.DRAFTER)} blocked in get", pct(consumer)))
    for stage in (pipe.target, pipe.drafter):
        if not is_na(stage.batches_per_s):
            evidence.append((f"{stage_role(ctx, stage.stage)} rate", f"{float(stage.batches_per_s):.2f} b/s"))  # type: ignore[arg-type]
    evidence.append((f"{slow} states", _top_states(slow_stage.shares, exclude=wait_state)))
    evidence.append((f"{other_name} meanwhile", _top_states(other_stage.shares)))
    other_threads = ctx.stage_threads(other)
    if other_threads and not other_stage.shares:
        evidence.append((f"{other_name} {wait_state.label}", pct(mean_share(other_threads, wait_state))))
    if ctx.assignment.how == "queues":
        evidence.append(("stages", f"inferred from queue use: producer = threads that put into "
                                   f"`{ctx.assignment.queue}`, consumer = threads that get from it"))
    yield Finding(
        rule_id=f"pipeline-bottleneck-{bottleneck}",
        severity=severity,
        claim=claim,
        evidence=tuple(evidence),
        remedy=_WAITING_REMEDY.format(stage=slow) if waits else _REMEDY[bottleneck].format(slow=slow, other=other_name),
        impact=waiting_share or 0.2,
        kind=SYMPTOM,
        stages=(bottleneck,),
    )


def _dedicated_gpus(ctx: Context, waiting: Stage, busy: Stage) -> tuple[int, ...]:
    """GPUs that only the waiting stage drives (from the devices the board gives its threads): they idle while it
    waits. A GPU both stages share does not idle when one of them waits (the GPU-utilisation rule judges it)."""
    board = {str(name): info.get(AppKeys.DEVICE) for name, info in sub(ctx.app(), AppKeys.THREADS).items()
             if hasattr(info, "get")}

    def device(t: ThreadStats) -> int | None:
        if t.gpu_index is not None:
            return t.gpu_index
        value = board.get(t.name)
        return int(value[5:]) if isinstance(value, str) and value.startswith("cuda:") and value[5:].isdigit() else None

    devices = {device(t) for t in ctx.threads if t.stage == waiting} - {None}
    shared = {device(t) for t in ctx.threads if t.stage == busy} - {None}
    return tuple(sorted(d for d in devices - shared if d is not None))


def _top_states(shares: object, exclude: ThreadState | None = None, n: int = 3) -> str:
    if not hasattr(shares, "items"):
        return "unknown"
    ranked = sorted(
        ((s, float(v)) for s, v in shares.items() if s != exclude and float(v) > 0.0),  # type: ignore[attr-defined]
        key=lambda sv: -sv[1],
    )[:n]
    if not ranked:
        return "unknown (no samples)"
    return ", ".join(f"{state.label if isinstance(state, ThreadState) else state} {pct(v)}" for state, v in ranked)
