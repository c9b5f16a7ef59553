"""GPU memory that grows without bound: every step keeps something on the device (predictions kept for an epoch-end
metric, losses kept with their graph, a cache without eviction), until the allocator runs out.

Two series, each over the window:

- the allocator probe's live tensors (``allocated_bytes`` of ``torch.cuda.memory_stats``, one reading per board,
  about two a second): what the program holds, not what the allocator caches;
- from outside, NVML's reading of the process's memory on the GPU (its ``used_memory_bytes`` in the process list,
  about one a second): what the caching allocator reserved, plus the context. A container whose PIDs NVML does not
  know is read through the device's memory while NVML lists at most one process on it.

Growth is a finding when it is steady and sustained, as ``resources.py`` judges the host's RSS: a least-squares
slope of at least ``GROWTH_BYTES_PER_S``, at least ``MIN_GROWTH_BYTES`` grown in the window, rising between most
readings, and the later half of the window growing at least half as fast as the earlier half (the allocator warming
up, a workspace or a bounded ring of recent batches fills up and levels off: no finding). Its cost is the projection:
the memory left (the process's cap from ``set_per_process_memory_fraction`` when the probe read one, else what the
device has free) over the slope. A warning when that is within the hour (an out-of-memory error is coming);
information otherwise, and while a thread compiles (torch.compile's autotuning allocates as it goes).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from dflash_contract.board import AllocatorKeys, ProbeName
from dflash_diag.analysis.findings._context import (
    Context,
    duration_text,
    halves_slopes,
    num,
    slope_per_s,
    steady_growth,
    sub,
)
from dflash_diag.analysis.findings._registry import RuleSpec
from dflash_diag.model import Finding, Severity, ThreadState

MIN_READINGS = 4
MIN_SPAN_S = 2.0
# A GPU working set is gigabytes; the allocator's warm-up grows it in 2-20 MiB segments: under 10 MB/s, or under
# 64 MiB grown in the window, is not told from it.
GROWTH_BYTES_PER_S = 10 * 2**20
MIN_GROWTH_BYTES = 64 * 2**20
RISING_SHARE = 0.7  # of the reading-to-reading changes
WARNING_HORIZON_S = 3600.0
COMPILING_SHARE = 0.2  # a thread compiling this share of its samples: its allocations are autotuning's
_GIB = 2**30

RULES = (RuleSpec("gpu-memory-growth"),)


@dataclass(frozen=True, slots=True)
class _Series:
    device: int
    what: str  # "live tensors (allocator probe)" / "the process's GPU memory (NVML)"
    points: tuple[tuple[float, float], ...]  # (seconds, bytes), oldest first
    headroom_bytes: float | None  # what it may still grow into
    headroom_what: str


def check(ctx: Context) -> Iterator[Finding]:
    if ctx.on_cuda() is False:
        return
    seen: set[int] = set()
    for series in (*_probe_series(ctx), *_nvml_series(ctx)):
        if series.device in seen:
            continue  # the probe's live tensors say it better than NVML's reservation: one finding per device
        finding = _judge(ctx, series)
        if finding is not None:
            seen.add(series.device)
            yield finding


def _judge(ctx: Context, series: _Series) -> Finding | None:
    points = series.points
    if len(points) < MIN_READINGS or points[-1][0] - points[0][0] < MIN_SPAN_S:
        return None
    slope = slope_per_s(points)
    grown = points[-1][1] - points[0][1]
    deltas = [b[1] - a[1] for a, b in zip(points, points[1:], strict=False)]
    rising = sum(1 for d in deltas if d > 0) / len(deltas)
    if slope < GROWTH_BYTES_PER_S or grown < MIN_GROWTH_BYTES or rising < RISING_SHARE:
        return None
    early, late = halves_slopes(points)
    if not steady_growth(early, late, GROWTH_BYTES_PER_S):
        return None
    span = points[-1][0] - points[0][0]
    left_s = series.headroom_bytes / slope if series.headroom_bytes is not None else None
    compiling = any(t.shares.get(ThreadState.COMPILE, 0.0) >= COMPILING_SHARE for t in ctx.sampled())
    warning = left_s is not None and left_s <= WARNING_HORIZON_S and not compiling
    growth = (f"{series.what} +{slope / 2**20:.0f} MB/s, {points[0][1] / _GIB:.2f} -> {points[-1][1] / _GIB:.2f} GiB "
              f"in {span:.0f} s")
    claim = f"cuda:{series.device}: GPU memory grows steadily: {growth}"
    if left_s is not None:
        claim += f"; at this rate {series.headroom_what} is used up in {duration_text(left_s)} (out of memory)"
    if compiling:
        claim += "; a thread is compiling (torch.compile allocates while it autotunes): look again after warm-up"
    evidence = [("growth", f"{slope / 2**20:+.1f} MB/s over {span:.1f} s ({len(points)} readings, "
                           f"{sum(1 for d in deltas if d > 0)} of {len(deltas)} rising)"),
                ("slope, earlier -> later half", f"{early / 2**20:+.1f} -> {late / 2**20:+.1f} MB/s"),
                ("read from", series.what)]
    if series.headroom_bytes is not None:
        evidence.append(("memory left", f"{series.headroom_bytes / _GIB:.1f} GiB ({series.headroom_what})"))
    return Finding(
        rule_id="gpu-memory-growth",
        severity=Severity.WARNING if warning else Severity.INFO,
        claim=claim,
        evidence=tuple(evidence),
        remedy="Something keeps every step's tensors on the GPU: predictions or losses appended to a list (keep "
               "running sums or fixed-size histograms on the device, or .detach().cpu() copies read later), tensors "
               "kept with their autograd graph (.item() or .detach() what is logged), a cache without eviction (bound "
               "it: a deque(maxlen=...)). torch.cuda.memory._record_memory_history() shows which line allocates.",
        impact=0.5 if warning else 0.1,
    )


def _probe_series(ctx: Context) -> list[_Series]:
    """Live tensors per device, one point per board of the window (the allocator probe)."""
    boards = ctx.obs.boards if isinstance(ctx.obs.boards, tuple) else ()
    points: dict[str, list[tuple[float, float]]] = {}
    last: dict[str, Mapping[str, object]] = {}
    for board in boards:
        payload = board.probe(ProbeName.ALLOCATOR)
        for device, stats in sub(payload, AllocatorKeys.DEVICES).items():
            if not isinstance(stats, Mapping):
                continue
            allocated = num(stats, AllocatorKeys.ALLOCATED_BYTES)
            if allocated is not None:
                points.setdefault(str(device), []).append((board.wall_time_s, allocated))
                last[str(device)] = stats
    out = []
    for device, series in points.items():
        if not device.isdigit():
            continue
        stats = last[device]
        headroom, what = _probe_headroom(ctx, int(device), stats)
        out.append(_Series(device=int(device), what="live tensors (allocator probe)", points=tuple(series),
                           headroom_bytes=headroom, headroom_what=what))
    return out


def _probe_headroom(ctx: Context, device: int, stats: Mapping[str, object]) -> tuple[float | None, str]:
    allocated = num(stats, AllocatorKeys.ALLOCATED_BYTES) or 0.0
    limit, total = num(stats, AllocatorKeys.LIMIT_BYTES), num(stats, AllocatorKeys.TOTAL_BYTES)
    if limit is not None and total is not None and limit < total:
        return max(0.0, limit - allocated), f"its {limit / _GIB:.1f} GiB cap (set_per_process_memory_fraction)"
    free = _device_free(ctx, device)
    reserved = num(stats, AllocatorKeys.RESERVED_BYTES) or allocated
    if free is not None:
        # The allocator also hands out what it already reserved and does not use.
        return free + max(0.0, reserved - allocated), "the GPU's free memory"
    if total is not None:
        return max(0.0, total - reserved), "the GPU's memory"
    return None, ""


def own_memory_series(ctx: Context) -> dict[int, list[tuple[float, float]]]:
    """The process's memory on each of its GPUs (NVML), one (seconds, bytes) point per sweep, oldest first."""
    sweeps = ctx.obs.gpus if isinstance(ctx.obs.gpus, tuple) else ()
    mine = set(ctx.process_gpus())
    points: dict[int, list[tuple[float, float]]] = {}
    for sweep in sweeps:
        for gpu in sweep:
            if gpu.index not in mine:
                continue
            used = _own_bytes(ctx, gpu)
            if used is not None:
                points.setdefault(gpu.index, []).append((gpu.monotonic_s, used))
    return points


def _nvml_series(ctx: Context) -> list[_Series]:
    """The process's memory on each of its GPUs, one point per NVML sweep."""
    out = []
    for device, series in own_memory_series(ctx).items():
        free = _device_free(ctx, device)
        out.append(_Series(device=device, what="the process's GPU memory (NVML)", points=tuple(series),
                           headroom_bytes=free, headroom_what="the GPU's free memory" if free is not None else ""))
    return out


def _own_bytes(ctx: Context, gpu: object) -> float | None:
    processes = getattr(gpu, "processes", None)
    if isinstance(processes, tuple):
        for p in processes:
            if p.pid == ctx.obs.pid and isinstance(p.used_memory_bytes, int | float):
                return float(p.used_memory_bytes)
        if len(processes) > 1:
            return None  # others share the GPU and NVML does not name us: the device's reading is not ours
    used = getattr(gpu, "memory_used_bytes", None)
    return float(used) if isinstance(used, int | float) and not isinstance(used, bool) else None


def _device_free(ctx: Context, device: int) -> float | None:
    """The GPU's free memory at the newest NVML reading."""
    sweeps = ctx.obs.gpus if isinstance(ctx.obs.gpus, tuple) else ()
    for sweep in reversed(sweeps):
        for gpu in sweep:
            if gpu.index == device and isinstance(gpu.memory_total_bytes, int) \
                    and isinstance(gpu.memory_used_bytes, int):
                return float(max(0, gpu.memory_total_bytes - gpu.memory_used_bytes))
    return None
