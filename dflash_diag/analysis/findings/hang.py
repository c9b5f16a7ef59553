"""A hung pipeline, and the threads that died: a stage with no live thread reads as a slow one unless we say so.

When every consumer of a queue has died of an exception, the process does not crash: its producers block in
``put`` forever, nothing runs, and a sampled view says "drafter-bound". Evidence of a hang, all required:
- some thread is blocked on a queue (``put`` or ``get``) in every sample of the window;
- no thread does work (no sample of any thread in a working state, beyond a stray one);
- the process used next to no CPU over the window (/proc), when /proc could be read;
- the other side of the queue has no live thread that waits on something else: a producer parked in a socket
  read or a sleep is a slow source (the stage verdict names where it waits), not a hang we can claim.
The threads that died are named from the ``threads`` probe (``threading.excepthook``, with the time), or from
the process's stderr when it goes to a file ("Exception in thread ..." and the exception line).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from dflash_contract.board import ProbeName, ThreadsKeys
from dflash_diag.analysis.findings._context import Context, items, num, text, threads_text
from dflash_diag.analysis.findings._registry import RuleSpec
from dflash_diag.analysis.sampled import process_cpu_pct
from dflash_diag.model import Finding, Severity, Stage, ThreadState
from dflash_diag.model.findings import CAUSE, SYMPTOM
from dflash_diag.model.waits import edge_text

MIN_SAMPLES = 5
MIN_WINDOW_S = 2.0
# A stray sample in a working state (a timer thread waking) is not progress; a tenth of one thread's is.
WORK_SHARE = 0.10
# Below this share of one core over the window, the process did no work (py-spy's own reads cost nothing to it).
IDLE_CPU_PCT = 3.0
_WAITING = frozenset({ThreadState.QUEUE_PUT, ThreadState.QUEUE_GET, ThreadState.IDLE})
_TOOL_THREADS = ("dflash-diag-",)
DEATHS_SHOWN = 4

RULES = (
    RuleSpec("pipeline-hang", kind=SYMPTOM, sampled=True, hang=True, halts=True),
    RuleSpec("thread-died", slows=False, explains=("pipeline-hang", "board-stale", "stalled", "collective-hang")),
)


def check(ctx: Context) -> Iterator[Finding]:
    deaths = _deaths(ctx)
    hang = _hang(ctx, deaths)
    if hang is not None:
        yield hang
    if deaths:
        yield _died(ctx, deaths, hung=hang is not None)


def hung_on_queue(ctx: Context) -> bool:
    """Whether this window is the hang this rule names (threads parked on a queue nobody serves)."""
    return _hang(ctx, []) is not None


def _hang(ctx: Context, deaths: list[dict[str, Any]]) -> Finding | None:
    obs = ctx.obs
    if len(obs.stacks) < MIN_SAMPLES or obs.window_s < MIN_WINDOW_S or not obs.process_alive:
        return None
    threads = [t for t in ctx.threads if t.n_samples > 0 and not t.name.startswith(_TOOL_THREADS)]
    if not threads:
        return None
    working = [t for t in threads if sum(v for s, v in t.shares.items() if s not in _WAITING) >= WORK_SHARE]
    if working:
        return None
    blocked_put = [t for t in threads if t.shares.get(ThreadState.QUEUE_PUT, 0.0) >= 0.999]
    blocked_get = [t for t in threads if t.shares.get(ThreadState.QUEUE_GET, 0.0) >= 0.999]
    on_queue = {t.name for t in blocked_put + blocked_get}
    # A side is stuck only when every live thread of its counterpart is stuck on a queue too (or there is none):
    # a feeder waiting in a socket read may deliver the next item at any moment.
    if any(t.stage == Stage.DRAFTER and t.name not in on_queue for t in threads):
        blocked_put = []
    if any(t.stage == Stage.TARGET and t.name not in on_queue for t in threads):
        blocked_get = []
    if not blocked_put and not blocked_get:
        return None
    cpu_pct = process_cpu_pct(ctx.obs)
    if cpu_pct is not None and cpu_pct >= IDLE_CPU_PCT:
        return None
    queue = ctx.assignment.queue
    where = f"`{queue}`" if queue else "the queue"
    parts = []
    if blocked_put:
        parts.append(f"{threads_text([t.name for t in blocked_put])} blocked in {where}.put for the whole "
                     f"{obs.window_s:.1f} s window (full: no thread takes from it)")
    if blocked_get:
        parts.append(f"{threads_text([t.name for t in blocked_get])} blocked in {where}.get for the whole "
                     f"{obs.window_s:.1f} s window (empty: no thread feeds it)")
    evidence: list[tuple[str, str]] = [("blocked all window", ", ".join(t.name for t in blocked_put + blocked_get))]
    missing = [stage for stage, blocked in ((Stage.DRAFTER, blocked_put), (Stage.TARGET, blocked_get))
               if blocked and not any(t.stage == stage for t in threads)]
    for stage in missing:
        evidence.append((ctx.names.label(stage).removeprefix("the "), "no live thread"))
    if cpu_pct is not None:
        evidence.append(("process CPU over the window", f"{cpu_pct:.1f}% of one core"))
    evidence.append(("threads doing any work", "none"))
    for death in deaths[:DEATHS_SHOWN]:
        evidence.append((f"died: {death['thread']}", _death_text(ctx, death)))
    dead = {str(d["thread"]) for d in deaths}
    for gone in _gone(ctx, exclude=dead)[:DEATHS_SHOWN]:
        evidence.append((f"gone: {gone[0]}", f"ended without an exception; last seen {gone[1]:.0f} s ago"))
    board = ctx.board
    if board is not None:
        evidence.append(("last board update", f"{board.age_s(ctx.now_wall_s):.0f} s ago"))
    # The threads off the queue are part of the hang too: what they wait on (a join on the blocked producer, a
    # condition) says how it came about.
    on_queue_names = {t.name for t in blocked_put + blocked_get}
    others = [n for n in ctx.waits.threads if n.name not in on_queue_names and n.waits and n.waits[0].share >= 0.9]
    if others:
        parts.append("meanwhile " + "; ".join(f"{n.name} {edge_text(n.waits[0])}" for n in others[:3]))
        evidence.extend((f"waits: {n.name}", edge_text(n.waits[0])) for n in others[:DEATHS_SHOWN])
    stages = tuple(sorted({Stage.DRAFTER for _ in blocked_put} | {Stage.TARGET for _ in blocked_get}))
    return Finding(
        rule_id="pipeline-hang",
        severity=Severity.CRITICAL,
        claim="the pipeline is hung, not slow: " + "; ".join(parts),
        evidence=tuple(evidence),
        remedy="Find why the other side stopped (the threads that died are listed; their tracebacks are in the "
        "program's stderr). Make worker failures stop the run: catch exceptions in each worker and put a "
        "sentinel/raise in the main thread, and use put/get with a timeout so a dead peer is noticed.",
        impact=1.0,
        kind=SYMPTOM,
        stages=stages,
    )


def _died(ctx: Context, deaths: list[dict[str, Any]], *, hung: bool) -> Finding:
    names = [str(d["thread"]) for d in deaths]
    first = deaths[0]
    evidence = [(f"{d['thread']}", _death_text(ctx, d)) for d in deaths[:DEATHS_SHOWN]]
    sources = sorted({str(d["source"]) for d in deaths})
    evidence.append(("seen by", ", ".join(sources)))
    return Finding(
        rule_id="thread-died",
        severity=Severity.WARNING,
        claim=f"{len(deaths)} thread(s) died of an uncaught exception: {threads_text(names)} "
        f"({first['exception']}" + (f" at {first['at']}" if first.get("at") else "") + ")",
        evidence=tuple(evidence),
        remedy="Fix the exception (its traceback is in the program's stderr). A worker that dies silently leaves "
        "its queue without a consumer or producer: propagate worker exceptions to the main thread"
        + (" -- here it hung the pipeline." if hung else "."),
        impact=1.0 if hung else 0.3,
        kind=CAUSE,
    )


def _deaths(ctx: Context) -> list[dict[str, Any]]:
    """Threads that died (probe first, with times; else stderr), skipping names that are alive again."""
    alive = {t.name for t in ctx.threads}
    out: dict[str, dict[str, Any]] = {}
    probe = ctx.probe(ProbeName.THREADS)
    for entry in items(probe, ThreadsKeys.DEATHS):
        if isinstance(entry, Mapping) and isinstance(entry.get(ThreadsKeys.THREAD), str):
            name = entry[ThreadsKeys.THREAD]
            out.setdefault(name, {"thread": name, "exception": text(entry, ThreadsKeys.EXCEPTION) or "?",
                                  "at": _short_where(text(entry, ThreadsKeys.WHERE) or ""),
                                  "when_s": num(entry, ThreadsKeys.WALL_TIME_S), "source": "threads probe"})
    for death in ctx.stderr.deaths:
        out.setdefault(death.thread, {"thread": death.thread, "exception": death.exception, "at": death.where,
                                      "when_s": None, "source": "stderr"})
    return [d for name, d in out.items() if name not in alive]


def _gone(ctx: Context, exclude: set[str]) -> list[tuple[str, float]]:
    """Threads the probe saw alive at an earlier publish and not since: (name, seconds since last seen)."""
    alive = {t.name for t in ctx.threads}
    out: dict[str, float] = {}
    for entry in items(ctx.probe(ProbeName.THREADS), ThreadsKeys.GONE):
        if not isinstance(entry, Mapping) or not isinstance(entry.get(ThreadsKeys.THREAD), str):
            continue
        name, seen = entry[ThreadsKeys.THREAD], num(entry, ThreadsKeys.LAST_SEEN_WALL_S)
        if name not in alive and name not in exclude and seen is not None and not name.startswith(_TOOL_THREADS):
            out[name] = max(0.0, ctx.now_wall_s - seen)
    return sorted(out.items(), key=lambda x: x[1])


def _death_text(ctx: Context, death: Mapping[str, Any]) -> str:
    where = f" at {death['at']}" if death.get("at") else ""
    when = ""
    wall = death.get("when_s")
    if isinstance(wall, float):
        when = f", {max(0.0, ctx.now_wall_s - wall):.0f} s ago"
    elif death.get("source") == "stderr" and ctx.obs.process is not None and ctx.obs.process.stderr_mtime_wall_s:
        when = f", stderr last written {max(0.0, ctx.now_wall_s - ctx.obs.process.stderr_mtime_wall_s):.0f} s ago"
    return f"{death['exception']}{where}{when}"


def _short_where(where: str) -> str:
    path, sep, rest = where.partition(":")
    return f"{path.rsplit('/', 1)[-1]}{sep}{rest}" if sep else where
