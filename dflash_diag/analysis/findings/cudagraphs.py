"""CUDA graphs under mode="reduce-overhead": skipped (with the reason), re-recorded every step, captured from
several threads on a torch where CUDAGraph Trees are not thread-safe."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from dflash_contract.board import AppKeys, CudagraphsKeys, ProbeName
from dflash_diag.analysis.findings._context import Context, items, num, sub, text, version_tuple
from dflash_diag.analysis.findings._registry import RuleSpec
from dflash_diag.model import Finding, Severity

# CUDAGraph Trees initialise their thread-local state lazily per Python thread from torch 2.13
# (PR #184357); before that any non-main, non-autograd thread asserts or shares state unsafely.
CUDAGRAPH_THREAD_SAFE_FROM = (2, 13)
# Re-recording on at least every other step means the graph is never replayed long enough to pay off.
RERECORD_PER_STEP = 0.5
# Without step counts: two re-records inside one window is already a pattern.
RERECORDS_IN_WINDOW = 2

RULES = (
    RuleSpec("cudagraph-skipped"),
    RuleSpec("cudagraph-rerecord"),
    RuleSpec("cudagraph-multi-thread", slows=False),
)


def check(ctx: Context) -> Iterator[Finding]:
    payload = ctx.probe(ProbeName.CUDAGRAPHS)
    if payload is None:
        yield from _skips_in_stderr(ctx)
        return
    yield from _skips(ctx, payload)
    yield from _rerecords(ctx, payload)
    yield from _threads(ctx, payload)


def _skips(ctx: Context, payload: Mapping[str, object]) -> Iterator[Finding]:
    skips = num(payload, CudagraphsKeys.SKIPS) or 0.0
    reasons = [r for r in items(payload, CudagraphsKeys.SKIP_REASONS) if isinstance(r, str)]
    if skips <= 0 and not reasons:
        yield from _partitions(payload)
        return
    cpu_only = bool(reasons) and all("cpu device" in r for r in reasons)
    expected = cpu_only and ctx.on_cuda() is False
    evidence = [("skips", f"{max(skips, len(reasons)):.0f}")] + [("reason", r[:160]) for r in reasons[:3]]
    # What was asked for (mode="reduce-overhead") does not happen: worth knowing, but what it costs (launch
    # overhead) is not measured here, so it is information.
    yield Finding(
        rule_id="cudagraph-skipped",
        severity=Severity.INFO,
        claim=("CUDA graphs skipped: expected on CPU" if expected else "CUDA graphs were skipped: "
               + (reasons[0][:100] if reasons else "reason not recorded")),
        evidence=tuple(evidence),
        remedy="Nothing to do on CPU." if expected else "Remove the cause named in the reason (mutated inputs, "
        "CPU tensors, dynamic shapes, incompatible ops); TORCH_LOGS=perf_hints lists them.",
        impact=0.0 if expected else 0.15,
    )


def _skips_in_stderr(ctx: Context) -> Iterator[Finding]:
    reasons = ctx.stderr.cudagraph_skips
    if not reasons:
        return
    yield Finding(
        rule_id="cudagraph-skipped",
        severity=Severity.INFO,
        claim=f"CUDA graphs were skipped (torch printed it): {reasons[0][:100]}",
        evidence=tuple(("stderr", f"skipping cudagraphs due to {r[:150]}") for r in reasons[:3]),
        remedy="Remove the cause named in the reason (mutated inputs, CPU tensors, dynamic shapes, incompatible "
        "ops); TORCH_LOGS=perf_hints lists them.",
        impact=0.1,
    )


def _rerecords(ctx: Context, payload: Mapping[str, object]) -> Iterator[Finding]:
    now = num(payload, CudagraphsKeys.RERECORDS)
    before = num(ctx.first_probe(ProbeName.CUDAGRAPHS), CudagraphsKeys.RERECORDS)
    if now is None or before is None or now <= before:
        return
    delta = now - before
    step_now, step_then = num(ctx.app(), AppKeys.STEP), None
    first = ctx.first_board
    if first is not None and isinstance(first.app, Mapping):
        step_then = num(first.app, AppKeys.STEP)
    steps = step_now - step_then if step_now is not None and step_then is not None else None
    per_step = delta / steps if steps else None
    if per_step is not None:
        if per_step < RERECORD_PER_STEP:
            return
    elif delta < RERECORDS_IN_WINDOW:
        return
    evidence = [("re-records in window", f"{delta:.0f}")]
    if per_step is not None:
        evidence.append(("re-records per step", f"{per_step:.2f}"))
    evidence.append(("captures total", f"{num(payload, CudagraphsKeys.CAPTURES) or 0:.0f}"))
    yield Finding(
        rule_id="cudagraph-rerecord",
        severity=Severity.WARNING,
        claim="CUDA graphs are re-recorded every step instead of replayed",
        evidence=tuple(evidence),
        remedy="Keep shapes and static inputs stable between steps (pad to buckets), call "
        "torch.compiler.cudagraph_mark_step_begin() once per step, and do not hold graph outputs across steps.",
        impact=0.2,
    )


def _threads(ctx: Context, payload: Mapping[str, object]) -> Iterator[Finding]:
    """Only what was seen: graphs captured from two or more threads on a torch where that is unsafe (warning),
    or from one non-main thread there (info: the next thread to capture will assert). A version alone is not a
    finding: a program that never captures a graph gets nothing."""
    threads = sorted({t for t in items(payload, CudagraphsKeys.CAPTURE_THREADS) if isinstance(t, str)})
    captures = num(payload, CudagraphsKeys.CAPTURES) or 0.0
    torch_version = text(payload, CudagraphsKeys.TORCH) or (ctx.board.writer.torch if ctx.board is not None else None)
    parsed = version_tuple(torch_version)
    unsafe_version = parsed is not None and parsed < CUDAGRAPH_THREAD_SAFE_FROM
    if not unsafe_version or captures <= 0 or not threads:
        return
    non_main = [t for t in threads if t != "MainThread"]
    if len(threads) < 2 and not non_main:
        return
    several = len(threads) >= 2
    evidence = [("capture threads", ", ".join(threads)), ("captures", f"{captures:.0f}"),
                ("torch", torch_version or "unknown")]
    by_thread = sub(payload, CudagraphsKeys.CAPTURES_BY_THREAD)
    if by_thread:
        evidence.append(("captures by thread", ", ".join(f"{k} {v}" for k, v in sorted(by_thread.items()))))
    yield Finding(
        rule_id="cudagraph-multi-thread",
        severity=Severity.WARNING if several else Severity.INFO,
        claim=(f"CUDA graphs were captured from {len(threads)} threads ({', '.join(threads[:4])}) on torch "
               f"{torch_version}, where CUDAGraph Trees are not thread-safe (pytorch#123177)" if several else
               f"CUDA graphs are captured in {non_main[0]} (not the main thread) on torch {torch_version}: a second "
               "capturing thread would assert (CUDAGraph Trees are not thread-safe before 2.13)"),
        evidence=tuple(evidence),
        remedy="Capture and replay each compiled callable on one dedicated thread per device (or capture all "
        "before the workers start), or upgrade to torch >= 2.13.",
        impact=0.2 if several else 0.0,
    )


def _partitions(payload: Mapping[str, object]) -> Iterator[Finding]:
    """torch >= 2.11 splits a graph around what cannot be captured instead of skipping it: part runs uncaptured."""
    messages = [m for m in items(payload, CudagraphsKeys.PARTITION_MESSAGES) if isinstance(m, str)]
    uncaptured = [m.strip() for m in messages if "non-cudagraphable" in m and "Partition" in m]
    if not uncaptured:
        return
    summary = next((m.strip() for m in messages if m.strip().startswith("Created")), None)
    evidence = [("partitions", f"{num(payload, CudagraphsKeys.PARTITIONS) or len(messages):.0f}")]
    if summary:
        evidence.append(("inductor", summary[:160]))
    evidence += [("uncaptured", m[:160]) for m in uncaptured[:3]]
    yield Finding(
        rule_id="cudagraph-skipped",
        severity=Severity.INFO,
        claim=f"CUDA graphs cover only part of the compiled graph: {len(uncaptured)} partition(s) run uncaptured",
        evidence=tuple(evidence),
        remedy="Move what keeps the partition out of the graph (CPU tensors, unsupported ops, dynamic shapes) "
        "to the device or out of the compiled region; TORCH_LOGS=cudagraphs shows each partition.",
        impact=0.1,
    )
