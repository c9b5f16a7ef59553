"""Resources over the window: host memory that grows without bound, with when it runs out (CPUs: ``scheduler.py``).

RSS is read with every /proc sweep (``sources.procfs.read_process``). A least-squares slope over the window
says how fast it grows; a process whose RSS rises in most sweeps by megabytes a second keeps something it
should drop (a replay buffer that keeps every batch, tensors kept with their graph, a cache without bound).
The projection divides what the host still has (``MemAvailable``) by the slope: a warning when that is under
an hour (the OOM killer is a measured cost coming), information otherwise.

Growth is a finding only when it is sustained: the later half of the window grows at least half as fast as the
earlier half (a cache, an arena or a prefetch buffer filling up levels off; a leak keeps its pace), and the
process is past its warm-up (its first minute: caches filling, lazy initialisation, the first batches' buffers).
Steady growth in the first minute is said as information, with what to do to tell a leak from a cache: look
again once the process is a minute old.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from dflash_diag.analysis.findings._context import (
    Context,
    duration_text,
    halves_slopes,
    slope_per_s,
    steady_growth,
)
from dflash_diag.analysis.findings._registry import RuleSpec
from dflash_diag.model import Finding, ProcessSample, Severity
from dflash_diag.model.findings import CAUSE

MIN_READINGS = 4
MIN_SPAN_S = 2.0
GROWTH_BYTES_PER_S = 5 * 1024 * 1024  # below 5 MB/s a warm-up or a cache filling up is as likely
MIN_GROWTH_BYTES = 32 * 1024 * 1024
RISING_SHARE = 0.7  # of the sweep-to-sweep changes: steady growth, not one jump
# A process this young may be filling caches (the data's first epoch, allocator arenas, lazy imports): growth in it
# is not yet shown to outlast warm-up.
WARMUP_S = 60.0
WARNING_HORIZON_S = 3600.0
_MIB = 1024 * 1024

RULES = (
    RuleSpec("host-memory-growth"),
)


def check(ctx: Context) -> Iterator[Finding]:
    yield from _memory(ctx)


def _memory(ctx: Context) -> Iterator[Finding]:
    readings = [r for r in ctx.obs.resources if r.rss_bytes is not None]
    if len(readings) < MIN_READINGS or readings[-1].monotonic_s - readings[0].monotonic_s < MIN_SPAN_S:
        return
    slope = rss_slope_bytes_per_s(readings)
    grown = (readings[-1].rss_bytes or 0) - (readings[0].rss_bytes or 0)
    deltas = [(b.rss_bytes or 0) - (a.rss_bytes or 0) for a, b in zip(readings, readings[1:], strict=False)]
    rising = sum(1 for d in deltas if d > 0) / len(deltas)
    if slope < GROWTH_BYTES_PER_S or grown < MIN_GROWTH_BYTES or rising < RISING_SHARE:
        return
    early_bps, late_bps = halves_slopes(_rss_points(readings))
    if not steady_growth(early_bps, late_bps, GROWTH_BYTES_PER_S):
        return
    span_s = readings[-1].monotonic_s - readings[0].monotonic_s
    available = readings[-1].host_available_bytes
    left_s = available / slope if available is not None and slope > 0 else None
    age_s = ctx.process_age_s()
    warming_up = age_s is not None and age_s < WARMUP_S
    severity = Severity.WARNING if left_s is not None and left_s < WARNING_HORIZON_S and not warming_up \
        else Severity.INFO
    rss = f"RSS +{slope / _MIB:.0f} MB/s, {readings[0].rss_bytes / _MIB:.0f} -> {readings[-1].rss_bytes / _MIB:.0f} MB in {span_s:.0f} s"  # type: ignore[operator]
    if warming_up:
        claim = (f"host memory grew steadily over the window ({rss}) in the process's first {age_s:.0f} s: caches "
                 f"filling up look the same until warm-up ends; `doctor` again once it is {WARMUP_S:.0f} s old tells "
                 "a leak")
    else:
        claim = f"host memory grows without bound: {rss}"
    if left_s is not None:
        claim += f"; the host's free memory ({available / 2**30:.1f} GiB) is gone in {duration_text(left_s)} at this rate"  # type: ignore[operator]
    evidence = [("RSS slope", f"{slope / _MIB:+.1f} MB/s over {span_s:.1f} s"),
                ("RSS", f"{readings[0].rss_bytes / _MIB:.0f} -> {readings[-1].rss_bytes / _MIB:.0f} MB"),  # type: ignore[operator]
                ("sweeps where it grew", f"{sum(1 for d in deltas if d > 0)} of {len(deltas)}"),
                ("slope, earlier -> later half", f"{early_bps / _MIB:+.1f} -> {late_bps / _MIB:+.1f} MB/s")]
    if age_s is not None:
        evidence.append(("process age", f"{age_s:.0f} s" + (" (warm-up)" if warming_up else "")))
    if available is not None:
        evidence.append(("host memory available", f"{available / 2**30:.1f} GiB"))
    threads = [r.threads for r in readings if r.threads is not None]
    if threads:
        evidence.append(("threads", f"{threads[0]} -> {threads[-1]}"))
    yield Finding(
        rule_id="host-memory-growth", severity=severity, claim=claim, evidence=tuple(evidence),
        remedy="Something keeps every step's data: bound the buffer or cache (a deque(maxlen=...), evict old "
               "entries), store .detach()'d / .cpu() copies instead of tensors that keep their graph, and check "
               "lists that are appended to every step (tracemalloc or memray shows the allocating line).",
        impact=0.5 if severity >= Severity.WARNING else 0.1, kind=CAUSE)


def rss_slope_bytes_per_s(readings: Sequence[ProcessSample]) -> float:
    """Least-squares slope of RSS over time."""
    return slope_per_s(_rss_points(readings))


def _rss_points(readings: Sequence[ProcessSample]) -> list[tuple[float, float]]:
    return [(r.monotonic_s, float(r.rss_bytes or 0)) for r in readings]
