"""torch.compile: recompile storms, the recompile-limit fallback to eager, graph breaks, warm-up, and compiling
from several threads where torch is not thread-safe.

Outside evidence (no probes): a thread's samples in dynamo/inductor frames (the ``compile`` state), grouped in
*episodes* (runs of consecutive compile samples) by the program line that called into the compiler. The same
call compiled again after it ran is a recompile; one long first compile is warm-up. The process's stderr adds
"torch._dynamo hit config.recompile_limit" when it goes to a file.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence

from dflash_contract.board import CompileKeys, PayloadKeys, ProbeName
from dflash_contract.board.keys import UNKNOWN_COMPILE_THREAD
from dflash_diag.analysis.findings._context import (
    Context,
    frame_site,
    items,
    num,
    pct,
    stage_role,
    sub,
    threads_text,
    version_tuple,
)
from dflash_diag.analysis.findings._registry import RuleSpec
from dflash_diag.analysis.frames import user_frames
from dflash_diag.model import Finding, Frame, Severity, Stage, ThreadSample, ThreadState, ThreadStats
from dflash_diag.model.findings import STATE

# Dynamo's default recompile_limit is 8 per code object: reaching it in total is a storm, and the next
# step (the limit) silently falls back to eager.
RECOMPILE_STORM_TOTAL = 8
# Recompiling more than once every 20 s after warm-up means shapes or guards change every few steps.
RECOMPILE_STORM_PER_S = 0.05
# A thread compiling for a fifth of the window is still warming up: its rates are not the steady state.
COMPILING_SHARE = 0.20
# From the stacks alone: the same call compiled again after running is a recompile. Two separated episodes at
# one call site in a few seconds means shapes or guards change step after step.
RECOMPILE_EPISODES = 2
# Compiling for the whole window this long after start is not a first-step warm-up any more.
WARMUP_MAX_S = 600.0
# torch.fx's `_is_fx_tracing_flag` is a module-global bool up to and including 2.14.0 (read in 2.11 to 2.13): a
# thread tracing with FX makes another thread's first torch.compile call raise, or silently run eager. 2.14.1
# replaces it with a threading.local, so compiling from several threads stops being a hazard there.
FX_TRACE_THREAD_SAFE_FROM = (2, 14, 1)
REASONS_SHOWN = 3
# The same guard of one function failing again: torch's automatic dynamic shapes make a dimension dynamic at its first
# change (one recompile: warm-up); a guard that fails a second time (a size under dynamic=False or past
# mark_static, a dtype, an object id that changes every step) recompiles at every new value: a storm in progress,
# however few recompiles the window holds.
REPEATED_GUARD_TIMES = 2
_CACHE_ENTRY = re.compile(r"^\s*\d+/\d+:\s*")
# The values a guard saw (what changed): "expected 10, actual 11", an object id or address. The rest (which tensor,
# which dimension) is what the guard is.
_GUARD_VALUES = re.compile(r"\b(expected|actual)\s+[^,;]+|\b\d{4,}\b|0x[0-9a-f]+", re.I)

RULES = (
    RuleSpec("compile-recompile-limit"),
    RuleSpec("compile-recompile-storm"),
    RuleSpec("compile-graph-breaks"),
    RuleSpec("warming-up", kind=STATE),
    RuleSpec("compile-multi-thread", slows=False),
)


def check(ctx: Context) -> Iterator[Finding]:
    payload = ctx.probe(ProbeName.COMPILE)
    episodes = compile_episodes(ctx)
    limit = list(_limit(ctx, payload))
    yield from limit
    storm = list(_storm(ctx, payload, episodes))
    yield from storm
    yield from _graph_breaks(ctx, payload)
    if not storm and not limit:  # a function that hit the recompile limit was compiled 8 times: past warm-up
        yield from _warming_up(ctx, payload, episodes)
    yield from _multi_thread(ctx, payload)


def compile_episodes(ctx: Context) -> dict[str, tuple[ThreadStats, float, dict[str, int]]]:
    """Per sampled thread compiling >= COMPILING_SHARE of its samples: (stats, compile share, {call site: episodes}).

    An episode is a run of compile samples; its site is the innermost frame of the program's own code in it
    (the call that entered the compiler). A new episode at a site starts only after the thread was seen
    *outside* that call: the call returned and was made again, so the compile is a recompile. Compiling the
    backward, autotuning, or a graph break inside one first call stay one episode (that is warm-up).
    """
    out: dict[str, tuple[ThreadStats, float, dict[str, int]]] = {}
    for stats in ctx.sampled():
        share = stats.shares.get(ThreadState.COMPILE, 0.0)
        if share < COMPILING_SHARE:
            continue
        sites: dict[str, int] = {}
        # Compile sites whose call has not been seen to return yet, with the frame that called them.
        open_calls: dict[Frame, Frame | None] = {}
        for thread, state in ctx.stats_rows(stats):
            if state == ThreadState.COMPILE:
                own = user_frames(thread)
                site = own[0] if own else None
                if site is not None and site not in open_calls:
                    key = frame_site(site)
                    sites[key] = sites.get(key, 0) + 1
                    open_calls[site] = _caller(thread, site)
                continue
            open_calls = {f: c for f, c in open_calls.items() if not _returned(thread, f, c)}
        out[stats.name] = (stats, share, sites)
    return out


def _caller(thread: ThreadSample, site: Frame) -> Frame | None:
    frames = [f for f in thread.frames if not f.native]
    i = frames.index(site)
    return frames[i + 1] if i + 1 < len(frames) else None


def _returned(thread: ThreadSample, site: Frame, caller: Frame | None) -> bool:
    """The thread is seen outside the call that compiled: the same function at another line, or the caller
    without the call. A stack missing both (a torn nonblocking read) proves nothing."""
    if site in thread.frames:
        return False
    if any(f.filename == site.filename and f.name == site.name and f.line != site.line for f in thread.frames):
        return True
    return caller is not None and caller in thread.frames


def _compile_site(thread: ThreadSample) -> str:
    own = user_frames(thread)
    return frame_site(own[0]) if own else "?"


def _recompiling(episodes: dict[str, tuple[ThreadStats, float, dict[str, int]]]) -> list[tuple[ThreadStats, float, str, int]]:
    found = []
    for stats, share, sites in episodes.values():
        site, n = max(sites.items(), key=lambda kv: kv[1], default=("?", 0))
        if n >= RECOMPILE_EPISODES:
            found.append((stats, share, site, n))
    return sorted(found, key=lambda x: -x[1])


def _reason_line(reason: object) -> str:
    return str(reason).strip().splitlines()[0][:140] if str(reason).strip() else "unknown"


def _limit(ctx: Context, payload: Mapping[str, object] | None) -> Iterator[Finding]:
    hits = num(payload, CompileKeys.RECOMPILE_LIMIT_HITS) or 0.0
    entries = [h for h in items(payload, CompileKeys.LIMIT_HITS) if isinstance(h, Mapping)]
    printed = ctx.stderr.recompile_limits
    if hits <= 0 and not entries and not printed:
        return
    functions = (sorted({str(h.get(CompileKeys.FUNCTION)) for h in entries}) or sorted({p.function for p in printed if p.function})
                 or ["a compiled function"])
    evidence: list[tuple[str, str]] = [("recompile-limit hits", f"{max(hits, len(entries), len(printed)):.0f}"
                                        + (" (probe)" if entries or hits else " (stderr)"))]
    for entry in entries[:REASONS_SHOWN]:
        evidence.append((f"{entry.get('function')} in {entry.get('thread')}", _reason_line(entry.get("reason"))))
    for hit in printed[:REASONS_SHOWN] if not entries else ():
        evidence.append((f"{hit.function or 'function'} (limit {hit.limit})", hit.reason or "reason not printed"))
    limits = sub(payload, CompileKeys.RECOMPILE_LIMIT)
    if limits:
        evidence.append(("recompile_limit by thread", ", ".join(f"{k}={v}" for k, v in sorted(limits.items()))))
    yield Finding(
        rule_id="compile-recompile-limit",
        severity=Severity.WARNING,
        claim=f"{', '.join(functions)} hit the recompile limit and now runs eagerly (silently slower)",
        evidence=tuple(evidence),
        remedy="Fix the changing guard (see the reason: mark dynamic dims, pad shapes to buckets), or raise "
        "torch._dynamo.config.recompile_limit inside every thread that runs the function (thread-local on torch >= 2.12).",
        impact=0.3,
    )


def _storm(ctx: Context, payload: Mapping[str, object] | None,
           episodes: dict[str, tuple[ThreadStats, float, dict[str, int]]]) -> Iterator[Finding]:
    total = num(payload, CompileKeys.RECOMPILES)
    before = num(ctx.first_probe(ProbeName.COMPILE), CompileKeys.RECOMPILES)
    window_s = ctx.board_window_s()
    rate = (total - before) / window_s if total is not None and before is not None and window_s > 0 else None
    recent = [r for r in items(payload, CompileKeys.RECENT_RECOMPILES) if isinstance(r, Mapping)]
    repeated = repeated_guards(recent)
    probe_storm = total is not None and (total >= RECOMPILE_STORM_TOTAL or (rate is not None and rate >= RECOMPILE_STORM_PER_S)
                                         or bool(repeated))
    recompiling = _recompiling(episodes)
    age_s = ctx.process_age_s()
    endless = [(s, share) for s, share, _ in episodes.values()
               if share >= 0.95 and age_s is not None and age_s >= WARMUP_MAX_S]
    if not probe_storm and not recompiling and not endless:
        return
    evidence: list[tuple[str, str]] = []
    if total is not None:
        evidence.append(("recompiles (probe)", f"{total:.0f}"))
    if rate is not None:
        evidence.append(("recompile rate", f"{rate:.2f}/s"))
    for function, guard, times in repeated[:REASONS_SHOWN]:
        evidence.append((f"{function}: the same guard failed {times} times",
                         f"{guard} (not warm-up: dynamic shapes absorb a change once)"))
    reasons = Counter(_reason_line(r.get(PayloadKeys.REASON)) for r in recent)
    functions = Counter(str(r.get(CompileKeys.FUNCTION)) for r in recent)
    for reason, n in reasons.most_common(REASONS_SHOWN):
        evidence.append((f"reason (x{n})", reason))
    if functions:
        evidence.append(("functions", ", ".join(f"{f} x{n}" for f, n in functions.most_common(REASONS_SHOWN))))
    compiling = {name: share for name, (_, share, _) in episodes.items()}
    for stats, share, site, n in recompiling[:REASONS_SHOWN]:
        evidence.append((f"{stats.name} compiling", f"{pct(share)} of its samples; {n} separate compiles at {site} "
                                                     f"in {ctx.obs.window_s:.0f} s"))
    for stats, share in endless[:REASONS_SHOWN]:
        evidence.append((f"{stats.name} compiling", f"{pct(share)} of the window, {age_s:.0f} s after start"))
    threads = [s for s, *_ in recompiling] or [s for s, _ in endless] or [
        t for t in ctx.sampled() if t.name in compiling]
    stages = tuple(sorted({t.stage for t in threads} - {Stage.OTHER}))
    share = max((compiling.get(t.name, 0.0) for t in threads), default=0.0)
    where = f"{stage_role(ctx, stages[0])} stage's " if len(stages) == 1 else ""
    what = []
    if total is not None:
        what.append(f"{total:.0f} recompiles" + (f", {rate:.2f}/s now" if rate else ""))
    if repeated:
        function, guard, times = repeated[0]
        what.append(f"{function} recompiled {times} times on the same guard: {guard}")
    elif recompiling:
        stats0, _, site0, n0 = recompiling[0]
        what.append(f"{n0} separate compiles of {site0} in {ctx.obs.window_s:.0f} s")
    if share:
        what.append(f"{pct(share)} of {threads_text([t.name for t in threads], 2)} samples in dynamo/inductor")
    claim = f"the {where}compiled step keeps recompiling (" + "; ".join(what) + ")" if what else \
        f"the {where}compiled step keeps recompiling"
    yield Finding(
        rule_id="compile-recompile-storm",
        severity=Severity.WARNING,
        claim=claim,
        evidence=tuple(evidence),
        remedy="Make the guard stable: torch._dynamo.mark_dynamic on the varying dims or dynamic=True, pad sequence "
        "lengths to a few buckets; TORCH_LOGS=recompiles (or `dflash-diag run`) shows each reason.",
        impact=max(share, 0.2),
        stages=stages,
    )


def repeated_guards(recent: Sequence[Mapping[str, object]]) -> list[tuple[str, str, int]]:
    """(function, guard, times) for each guard that failed in REPEATED_GUARD_TIMES or more of a function's recent
    recompiles, most first. A recompile's reason lists the cache entries it failed ("0/1: tensor 'x' size mismatch at
    index 1. expected 11, actual 12; 0/0: ..."), newest first: the first is the guard that made this compile; the
    values it saw (expected/actual, ids) are left out, so the same guard failing on a new value counts again, while
    another dimension of the same tensor is another guard."""
    counts: Counter[tuple[str, str]] = Counter()
    for row in recent:
        reason = str(row.get(PayloadKeys.REASON) or "").strip()
        if not reason:
            continue
        first = _CACHE_ENTRY.sub("", reason.split(";")[0].strip().splitlines()[0])
        guard = _GUARD_VALUES.sub(lambda m: f"{m.group(1)} #" if m.group(1) else "#", first).strip()[:140]
        counts[(str(row.get(CompileKeys.FUNCTION)), guard)] += 1
    return [(f, g, n) for (f, g), n in counts.most_common() if n >= REPEATED_GUARD_TIMES]


def _graph_breaks(ctx: Context, payload: Mapping[str, object] | None) -> Iterator[Finding]:
    total = num(payload, CompileKeys.GRAPH_BREAKS)
    if not total:
        return
    before = num(ctx.first_probe(ProbeName.COMPILE), CompileKeys.GRAPH_BREAKS)
    growing = before is not None and total > before
    reasons = sub(payload, CompileKeys.GRAPH_BREAK_REASONS)
    ranked = sorted(((str(k), v) for k, v in reasons.items() if isinstance(v, int | float)), key=lambda kv: -kv[1])
    evidence: list[tuple[str, str]] = [("graph breaks", f"{total:.0f}")]
    if before is not None:
        evidence.append(("new in this window", f"{total - before:.0f}"))
    for reason, n in ranked[:REASONS_SHOWN]:
        evidence.append((f"reason (x{n:.0f})", _reason_line(reason)))
    yield Finding(
        rule_id="compile-graph-breaks",
        severity=Severity.WARNING if growing else Severity.INFO,
        claim="graph breaks in the hot loop: compiled regions are split and run partly eager"
        if growing
        else f"{total:.0f} graph breaks happened (none in this window)",
        evidence=tuple(evidence),
        remedy="Remove the break (see reasons: .item(), print, data-dependent branches); "
        "torch._dynamo.explain(fn)(*args) lists each one.",
        impact=0.1 if growing else 0.0,
    )


def _warming_up(ctx: Context, payload: Mapping[str, object] | None,
                episodes: dict[str, tuple[ThreadStats, float, dict[str, int]]]) -> Iterator[Finding]:
    compiling_now = payload is not None and payload.get(CompileKeys.COMPILING_NOW) is True
    busy = sorted(((stats, share) for stats, share, _ in episodes.values()), key=lambda x: -x[1])
    if not compiling_now and not busy:
        return
    age_s = ctx.process_age_s()
    seconds = num(payload, CompileKeys.COMPILE_TIME_S)
    names = threads_text([s.name for s, _ in busy]) if busy else "a thread"
    so_far = []
    if busy:
        so_far.append(f"{pct(busy[0][1])} of {busy[0][0].name}'s samples in the {ctx.obs.window_s:.0f} s window")
        cpu_s = _thread_cpu_s(ctx, busy[0][0])
        if cpu_s is not None:
            so_far.append(f"{busy[0][0].name} has used {cpu_s:.0f} s of CPU so far")
    if seconds:
        so_far.append(f"{seconds:.0f} s of finished compiles (probe)")
    if age_s is not None:
        so_far.append(f"the process started {age_s:.0f} s ago")
    evidence: list[tuple[str, str]] = [(f"{stats.name} compiling", pct(share)) for stats, share in busy[:4]]
    if seconds is not None:
        evidence.append(("compile time so far (probe)", f"{seconds:.1f} s"))
    if age_s is not None:
        evidence.append(("process age", f"{age_s:.0f} s"))
    evidence.append(("compiling now (probe)", str(compiling_now) if payload is not None else "no probe"))
    yield Finding(
        rule_id="warming-up",
        severity=Severity.INFO,
        claim=f"warming up: torch.compile is compiling in {names} (" + ", ".join(so_far) + "); throughput and "
        "stage verdicts are held back until it ends",
        evidence=tuple(evidence),
        remedy="Look again once the first steps have run; if it never ends, it is a recompile storm "
        "(compile-recompile-storm).",
        impact=max((share for _, share in busy), default=0.5),
        kind=STATE,
        stages=tuple(sorted({s.stage for s, _ in busy} - {Stage.OTHER})),
    )


def _thread_cpu_s(ctx: Context, stats: ThreadStats) -> float | None:
    """CPU seconds the thread has used since it started (/proc utime + stime, newest reading)."""
    for sweep in reversed(ctx.obs.proc):
        for reading in sweep:
            if reading.tid == stats.os_thread_id:
                return reading.utime_s + reading.stime_s
    return None


def _multi_thread(ctx: Context, payload: Mapping[str, object] | None) -> Iterator[Finding]:
    by_thread = sub(payload, CompileKeys.BY_THREAD)
    # "?" holds the compiles torch's metrics list from before the probe could tell their thread (those of a program
    # attached to after its warm-up): any thread, the named ones included, so never a second thread by itself (it
    # was, on a healthy program that compiled in one thread, attached on the H200).
    compiling = {
        str(name) for name, counts in by_thread.items()
        if name != UNKNOWN_COMPILE_THREAD and isinstance(counts, Mapping) and (num(counts, CompileKeys.COMPILES) or 0) > 0
    }
    # Seen compiling at the same time in the stacks (the probe counts a compile only once it finished).
    concurrent = sorted(t.name for t in ctx.threads if t.n_samples > 0 and t.shares.get(ThreadState.COMPILE, 0.0)
                        >= COMPILING_SHARE)
    compiling.update(concurrent)
    if len(compiling) < 2:
        return
    board = ctx.board
    torch_version = board.writer.torch if board is not None else None
    parsed = version_tuple(torch_version)
    if parsed is not None and parsed >= FX_TRACE_THREAD_SAFE_FROM:
        return
    yield Finding(
        rule_id="compile-multi-thread",
        severity=Severity.WARNING,
        claim=f"torch.compile runs from {len(compiling)} threads on torch {torch_version or '?'}, where tracing is not thread-safe",
        evidence=(
            ("compiling threads", ", ".join(sorted(compiling)[:8])),
            ("seen compiling concurrently", ", ".join(concurrent) if len(concurrent) > 1 else "no"),
            ("torch", torch_version or "unknown"),
            ("known issues", "pytorch#126024 (FX tracing flag), #118260 (config races)"),
        ),
        remedy="Compile and warm up each compiled callable serially (one lock, or one thread) before the "
        "worker threads start; with error_on_nested_fx_trace=False a racing thread silently runs eager.",
        impact=0.15,
    )
