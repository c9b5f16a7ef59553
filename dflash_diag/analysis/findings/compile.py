"""torch.compile: recompile storms, the recompile-limit fallback to eager, graph breaks, compiles in progress,
and compiling from several threads where torch is not thread-safe."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping

from dflash_contract.board import CompileKeys, ProbeName
from dflash_diag.analysis.findings._context import (
    Context,
    items,
    mean_share,
    num,
    pct,
    sub,
    version_tuple,
)
from dflash_diag.model import Finding, Severity, ThreadState

# Dynamo's default recompile_limit is 8 per code object: reaching it in total is a storm, and the next
# step (the limit) silently falls back to eager.
RECOMPILE_STORM_TOTAL = 8
# Recompiling more than once every 20 s after warm-up means shapes or guards change every few steps.
RECOMPILE_STORM_PER_S = 0.05
# A thread compiling for a fifth of the window is still warming up: its rates are not the steady state.
COMPILING_SHARE = 0.20
# The FX tracing flag stays a process-global bool up to and including 2.14.0 (probe-apis.md section 0).
FX_TRACE_THREAD_SAFE_FROM = (2, 14, 1)
REASONS_SHOWN = 3


def check(ctx: Context) -> Iterator[Finding]:
    payload = ctx.probe(ProbeName.COMPILE)
    yield from _limit(payload)
    yield from _storm(ctx, payload)
    yield from _graph_breaks(ctx, payload)
    yield from _in_progress(ctx, payload)
    yield from _multi_thread(ctx, payload)


def _reason_line(reason: object) -> str:
    return str(reason).strip().splitlines()[0][:140] if str(reason).strip() else "unknown"


def _limit(payload: Mapping[str, object] | None) -> Iterator[Finding]:
    hits = num(payload, CompileKeys.RECOMPILE_LIMIT_HITS) or 0.0
    entries = [h for h in items(payload, CompileKeys.LIMIT_HITS) if isinstance(h, Mapping)]
    if hits <= 0 and not entries:
        return
    functions = sorted({str(h.get(CompileKeys.FUNCTION)) for h in entries}) or ["unknown"]
    evidence: list[tuple[str, str]] = [("recompile-limit hits", f"{max(hits, len(entries)):.0f}")]
    for entry in entries[:REASONS_SHOWN]:
        evidence.append((f"{entry.get('function')} in {entry.get('thread')}", _reason_line(entry.get("reason"))))
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


def _storm(ctx: Context, payload: Mapping[str, object] | None) -> Iterator[Finding]:
    total = num(payload, CompileKeys.RECOMPILES)
    if total is None:
        return
    before = num(ctx.first_probe(ProbeName.COMPILE), CompileKeys.RECOMPILES)
    window_s = ctx.board_window_s()
    rate = (total - before) / window_s if before is not None and window_s > 0 else None
    if total < RECOMPILE_STORM_TOTAL and (rate is None or rate < RECOMPILE_STORM_PER_S):
        return
    recent = [r for r in items(payload, CompileKeys.RECENT_RECOMPILES) if isinstance(r, Mapping)]
    reasons = Counter(_reason_line(r.get("reason")) for r in recent)
    functions = Counter(str(r.get(CompileKeys.FUNCTION)) for r in recent)
    evidence: list[tuple[str, str]] = [("recompiles", f"{total:.0f}")]
    if rate is not None:
        evidence.append(("recompile rate", f"{rate:.2f}/s"))
    for reason, n in reasons.most_common(REASONS_SHOWN):
        evidence.append((f"reason (x{n})", reason))
    if functions:
        evidence.append(("functions", ", ".join(f"{f} x{n}" for f, n in functions.most_common(REASONS_SHOWN))))
    yield Finding(
        rule_id="compile-recompile-storm",
        severity=Severity.WARNING,
        claim=f"torch.compile keeps recompiling ({total:.0f} recompiles" + (f", {rate:.2f}/s now)" if rate else ")"),
        evidence=tuple(evidence),
        remedy="Make the guard stable: torch._dynamo.mark_dynamic on varying dims or dynamic=True, pad sequence "
        "lengths to a few buckets; TORCH_LOGS=recompiles shows each reason.",
        impact=0.2,
    )


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


def _in_progress(ctx: Context, payload: Mapping[str, object] | None) -> Iterator[Finding]:
    compiling_now = payload is not None and payload.get(CompileKeys.COMPILING_NOW) is True
    busy = [(t.name, t.shares.get(ThreadState.COMPILE, 0.0)) for t in ctx.sampled()]
    busy = [(n, s) for n, s in busy if s >= COMPILING_SHARE]
    if not compiling_now and not busy:
        return
    evidence: list[tuple[str, str]] = [(f"{name} compiling", pct(share)) for name, share in busy[:4]]
    seconds = num(payload, CompileKeys.COMPILE_TIME_S)
    if seconds is not None:
        evidence.append(("compile time so far", f"{seconds:.1f} s"))
    evidence.append(("compiling now (probe)", str(compiling_now)))
    yield Finding(
        rule_id="compile-in-progress",
        severity=Severity.INFO,
        claim="torch.compile is still compiling: throughput and shares are not steady-state yet",
        evidence=tuple(evidence),
        remedy="Look again after warm-up; if it never ends, see compile-recompile-storm.",
        impact=max((s for _, s in busy), default=0.0) or mean_share(ctx.threads, ThreadState.COMPILE),
    )


def _multi_thread(ctx: Context, payload: Mapping[str, object] | None) -> Iterator[Finding]:
    by_thread = sub(payload, CompileKeys.BY_THREAD)
    compiling = {
        str(name) for name, counts in by_thread.items() if isinstance(counts, Mapping) and (num(counts, CompileKeys.COMPILES) or 0) > 0
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
