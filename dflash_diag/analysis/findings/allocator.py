"""CUDA caching-allocator churn: cudaMalloc/cudaFree rate, allocation retries, fragmentation, empty_cache in the loop."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from dflash_contract.board import AllocatorKeys, ProbeName
from dflash_diag.analysis.findings._context import Context, num, pct, sub, thread_label
from dflash_diag.analysis.findings._registry import RuleSpec
from dflash_diag.analysis.findings.gpu_memory import own_memory_series
from dflash_diag.model import Finding, Severity

# In steady state the caching allocator serves everything from its cache: every cudaMalloc/cudaFree is a
# synchronising driver call of ~0.1-1 ms, so more than 10 per second per device is churn, not warm-up.
CHURN_CALLS_PER_S = 10.0
# A retry means an allocation failed, the allocator freed all cached blocks (synchronising) and tried again.
RETRIES_PER_S = 0.0
# More than a third of reserved memory in inactive split blocks: the cache is fragmented.
FRAGMENTATION_SHARE = 0.33
# Fragmentation only matters when it is big enough to force new cudaMallocs.
FRAGMENTATION_MIN_BYTES = 512 * 1024**2
EMPTY_CACHE_FRAME = "empty_cache"
# From outside: the caching allocator never hands memory back to the driver by itself; the process's memory (NVML)
# falling between two readings by this much means its cache was freed: an allocation that failed and was retried
# after freeing every cached block (near a memory cap), or torch.cuda.empty_cache().
RELEASE_MIN_BYTES = 512 * 1024**2
RELEASE_MIN_SHARE = 0.2  # of the highest reading of the window
RELEASES_WARNING = 2  # the cache freed again and again, not once

RULES = (
    RuleSpec("alloc-churn"),
    RuleSpec("alloc-retries"),
    RuleSpec("alloc-fragmentation"),
    RuleSpec("alloc-empty-cache", produces=("alloc-churn",)),
)


def check(ctx: Context) -> Iterator[Finding]:
    payload = ctx.probe(ProbeName.ALLOCATOR)
    first = sub(ctx.first_probe(ProbeName.ALLOCATOR), AllocatorKeys.DEVICES)
    for device, stats in sorted(sub(payload, AllocatorKeys.DEVICES).items()):
        if isinstance(stats, Mapping):
            before = first.get(device)
            yield from _device(ctx, str(device), stats, before if isinstance(before, Mapping) else None)
    empty_cache = list(_empty_cache(ctx, payload, first))
    yield from empty_cache
    if not sub(payload, AllocatorKeys.DEVICES) and not empty_cache:
        yield from _released_from_outside(ctx)


def _released_from_outside(ctx: Context) -> Iterator[Finding]:
    """No allocator probe: the process's GPU memory (NVML) falling and growing back says the cache was freed."""
    if ctx.on_cuda() is False:
        return
    for device, points in sorted(own_memory_series(ctx).items()):
        if len(points) < 3:
            continue
        peak = max(b for _, b in points)
        floor = max(RELEASE_MIN_BYTES, RELEASE_MIN_SHARE * peak)
        drops = [(a[1] - b[1]) for a, b in zip(points, points[1:], strict=False) if a[1] - b[1] >= floor]
        regrown = points[-1][1] - min(b for _, b in points) >= floor or len(drops) >= RELEASES_WARNING
        if not drops or not regrown:
            continue  # one fall that stays down is memory given back once (a phase that ended), not a cycle
        span = points[-1][0] - points[0][0]
        yield Finding(
            rule_id="alloc-retries",
            severity=Severity.WARNING if len(drops) >= RELEASES_WARNING else Severity.INFO,
            claim=f"cuda:{device}: the process's GPU memory fell {len(drops)} time(s) in {span:.0f} s by up to "
                  f"{max(drops) / 1024**3:.1f} GiB and grew back (NVML, peak {peak / 1024**3:.1f} GiB): the caching "
                  "allocator freed its cache, which it does only when an allocation fails and is retried (near a "
                  "memory cap) or when torch.cuda.empty_cache() is called (none seen in the stacks)",
            evidence=(("process GPU memory", ", ".join(f"{b / 1024**3:.1f}" for _, b in points) + " GiB (NVML, one "
                                                                                                   "reading a second)"),
                      ("falls", f"{len(drops)} of >= {floor / 1024**3:.1f} GiB")),
            remedy="Lower peak memory or keep the sizes steady (pad to a few lengths, smaller batches or chunks), or "
                   "set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; each retry frees every cached block and "
                   "synchronises the device. `dflash-diag attach PID --probes allocator` counts the retries.",
            impact=0.2 if len(drops) >= RELEASES_WARNING else 0.05,
        )


def _device(ctx: Context, device: str, stats: Mapping[str, object], before: Mapping[str, object] | None) -> Iterator[Finding]:
    alloc_rate = num(stats, AllocatorKeys.DEVICE_ALLOC_PER_S) or 0.0
    free_rate = num(stats, AllocatorKeys.DEVICE_FREE_PER_S) or 0.0
    if alloc_rate + free_rate >= CHURN_CALLS_PER_S:
        yield Finding(
            rule_id="alloc-churn",
            severity=Severity.WARNING,
            claim=f"cuda:{device}: the caching allocator calls cudaMalloc/cudaFree {alloc_rate + free_rate:.0f} times/s",
            evidence=(
                ("cudaMalloc rate", f"{alloc_rate:.1f}/s"),
                ("cudaFree rate", f"{free_rate:.1f}/s"),
                ("reserved swing", _gib(num(stats, AllocatorKeys.RESERVED_SWING_BYTES))),
                ("sync all streams", f"{num(stats, AllocatorKeys.SYNC_ALL_STREAMS_PER_S) or 0:.1f}/s"),
            ),
            remedy="Keep shapes stable (pad to buckets), preallocate/reuse buffers, set "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, never call torch.cuda.empty_cache() in the loop.",
            impact=0.15,
        )
    retries_rate = num(stats, AllocatorKeys.ALLOC_RETRIES_PER_S) or 0.0
    retries_now, retries_then = num(stats, AllocatorKeys.ALLOC_RETRIES), num(before, AllocatorKeys.ALLOC_RETRIES)
    new_retries = retries_now - retries_then if retries_now is not None and retries_then is not None else 0.0
    if retries_rate > RETRIES_PER_S or new_retries > 0:
        yield Finding(
            rule_id="alloc-retries",
            severity=Severity.WARNING,
            claim=f"cuda:{device}: allocations fail and are retried after freeing the whole cache (near OOM)",
            evidence=(
                ("alloc retries", f"{retries_now or 0:.0f} total, {retries_rate:.2f}/s"),
                ("reserved", _gib(num(stats, AllocatorKeys.RESERVED_BYTES))),
                ("allocated", _gib(num(stats, AllocatorKeys.ALLOCATED_BYTES))),
            ),
            remedy="Lower peak memory (smaller batch or chunks, more checkpointing) or set "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; each retry synchronises the device.",
            impact=0.2,
        )
    frag = num(stats, AllocatorKeys.FRAGMENTATION_SHARE)
    inactive = num(stats, AllocatorKeys.INACTIVE_SPLIT_BYTES) or 0.0
    if frag is not None and frag >= FRAGMENTATION_SHARE and inactive >= FRAGMENTATION_MIN_BYTES:
        yield Finding(
            rule_id="alloc-fragmentation",
            severity=Severity.INFO,
            claim=f"cuda:{device}: {pct(frag)} of reserved memory sits in unusable split blocks",
            evidence=(("fragmentation", pct(frag)), ("inactive split", _gib(inactive)),
                      ("reserved", _gib(num(stats, AllocatorKeys.RESERVED_BYTES)))),
            remedy="PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (or max_split_size_mb) and stable shapes.",
            impact=0.05,
        )


def _empty_cache(ctx: Context, payload: Mapping[str, object] | None, first: Mapping[str, object]) -> Iterator[Finding]:
    new_calls = 0.0
    for device, stats in sub(payload, AllocatorKeys.DEVICES).items():
        before = first.get(device)
        now, then = num(stats, AllocatorKeys.EMPTY_CACHE_CALLS) if isinstance(stats, Mapping) else None, None
        if isinstance(before, Mapping):
            then = num(before, AllocatorKeys.EMPTY_CACHE_CALLS)
        if now is not None and then is not None:
            new_calls += max(0.0, now - then)
    seen_in: dict[str, str] = {}
    for sample in ctx.obs.stacks:
        for thread in sample.threads:
            for i, frame in enumerate(thread.frames):
                if frame.name == EMPTY_CACHE_FRAME and "cuda" in frame.filename:
                    caller = next((f for f in thread.frames[i + 1:] if not f.native and "torch/" not in f.filename), None)
                    seen_in.setdefault(thread_label(thread), f"{caller.short_filename}:{caller.line}" if caller else "?")
                    break
    if new_calls <= 0 and not seen_in:
        return
    evidence: list[tuple[str, str]] = []
    if new_calls > 0:
        evidence.append(("empty_cache calls in window", f"{new_calls:.0f}"))
    for label, site in list(seen_in.items())[:3]:
        evidence.append((f"seen in {label}", site))
    yield Finding(
        rule_id="alloc-empty-cache",
        severity=Severity.WARNING,
        claim="torch.cuda.empty_cache() is called inside the training loop",
        evidence=tuple(evidence),
        remedy="Remove it: it returns every cached block to the driver, synchronises, and forces fresh "
        "cudaMallocs on the next step.",
        impact=0.1,
    )


def _gib(value: float | None) -> str:
    return "N/A" if value is None else f"{value / 1024**3:.2f} GiB"
