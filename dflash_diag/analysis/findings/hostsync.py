"""Host-sync storms: the step waiting on the GPU at `.item()`, `.cpu()` or synchronize, many times per step."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from dflash_diag.analysis.findings._context import (
    Context,
    frame_site,
    lower_bound,
    mean_share,
    pct,
    python_frames,
    stage_samples,
)
from dflash_diag.model import Finding, GpuSample, Severity, ThreadState, ThreadStats
from dflash_diag.model.evidence import is_library_file
from dflash_diag.model.stacks import ThreadSample

# A stage whose threads sit in a host sync a quarter of the time cannot queue GPU work ahead: the GPU
# drains between launches. Occasional syncs (logging every N steps) stay far below. Sampled shares are
# compared at their one-sigma lower bound.
SYNC_WARNING_SHARE = 0.25
# Native frames that are a host<->device synchronisation (used when the timeline cannot be aligned).
SYNC_NATIVE_FRAMES = frozenset(
    {"cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cuStreamSynchronize",
     "cuCtxSynchronize", "cuEventSynchronize", "_local_scalar_dense", "_local_scalar_dense_cuda"}
)
SITES_SHOWN = 3
# A GPU this busy is the bottleneck: a host thread waiting on it is GPU-bound, not losing time to syncs.
GPU_SATURATED_PCT = 90.0
# ... unless it draws little power: NVML's utilisation is the share of time *any* kernel runs, so a stream of tiny
# kernels separated by syncs reads 90-100% on a GPU that mostly waits (the H200 casebook's per-chunk .item()
# program). A GPU doing the work that bounds a step draws well over this share of its power limit.
GPU_WORKING_POWER_SHARE = 0.40


def check(ctx: Context) -> Iterator[Finding]:
    # Pipeline stages are judged as a whole; threads outside them one by one (an idle main thread must not
    # dilute a training thread that syncs all the time).
    groups: list[tuple[str, str, tuple[ThreadStats, ...]]] = [
        (stage, stage, ctx.stage_threads(stage)) for stage in ("drafter", "target") if ctx.stage_threads(stage)]
    groups += [(t.name, "other", (t,)) for t in ctx.stage_threads("other")]
    shares = [(label, stage, mean_share(threads, ThreadState.GPU_WAIT), threads) for label, stage, threads in groups]
    hot = [x for x in shares if lower_bound(x[2], stage_samples(x[3])) >= SYNC_WARNING_SHARE]
    if not hot:
        return
    label, stage, share, threads = max(hot, key=lambda x: x[2])
    sites = _sync_sites(ctx, threads)
    evidence: list[tuple[str, str]] = [(f"{lbl} in GPU wait", pct(v)) for lbl, _, v, _ in shares if v > 0][:6]
    for site, n in sites.most_common(SITES_SHOWN):
        evidence.append(("sync site", f"{site} ({n} samples)"))
    where = f" at {sites.most_common(1)[0][0]}" if sites else ""
    who = f"{stage} threads" if stage != "other" else label
    util = _gpu_util_pct(ctx, threads)
    if util is not None:
        evidence.append(("GPU utilisation", f"{util:.0f}% (NVML, mean over the window)"))
    power = _gpu_power(ctx, threads)
    if power is not None:
        evidence.append(("GPU power", f"{power[0]:.0f} W of its {power[1]:.0f} W limit (NVML, mean over the window)"))
    low_power = power is not None and power[0] < GPU_WORKING_POWER_SHARE * power[1]
    saturated = util is not None and util >= GPU_SATURATED_PCT and not low_power
    claim = f"{who} wait on the GPU {pct(share)} of the time in host syncs{where}"
    if saturated:
        # Waiting on a GPU that is busy all the time is being GPU-bound: the syncs cost (almost) nothing.
        claim += f"; the GPU is busy {util:.0f}% of the time, so the stage is GPU-bound and the syncs cost little"
    yield Finding(
        rule_id="host-sync-storm",
        severity=Severity.INFO if saturated else Severity.WARNING,
        claim=claim,
        evidence=tuple(evidence),
        remedy="Keep values on the device inside the step (no .item()/.cpu()/print of tensors per chunk), "
        "accumulate metrics on the GPU and read them every N steps; use non_blocking copies.",
        impact=0.0 if saturated else share,
        stages=(stage,) if stage != "other" else (),
    )


def _gpus(ctx: Context, threads: tuple[ThreadStats, ...]) -> list[GpuSample]:
    """NVML readings over the window of the GPUs these threads drive (their devices, else the process's)."""
    indices = {t.gpu_index for t in threads if t.gpu_index is not None} or set(ctx.process_gpus())
    sweeps = ctx.obs.gpus if isinstance(ctx.obs.gpus, tuple) else ()
    return [g for sweep in sweeps for g in sweep if g.index in indices]


def _gpu_util_pct(ctx: Context, threads: tuple[ThreadStats, ...]) -> float | None:
    values = [float(g.util_pct) for g in _gpus(ctx, threads) if isinstance(g.util_pct, int | float)]
    return sum(values) / len(values) if values else None


def _gpu_power(ctx: Context, threads: tuple[ThreadStats, ...]) -> tuple[float, float] | None:
    """(mean draw, mean limit) in watts, over the readings that have both."""
    pairs = [(float(g.power_w), float(g.power_limit_w)) for g in _gpus(ctx, threads)
             if isinstance(g.power_w, int | float) and isinstance(g.power_limit_w, int | float) and g.power_limit_w > 0]
    if not pairs:
        return None
    return sum(p for p, _ in pairs) / len(pairs), sum(limit for _, limit in pairs) / len(pairs)


def _thread_samples(ctx: Context, stats: ThreadStats) -> list[ThreadSample]:
    found: list[ThreadSample] = []
    for sample in ctx.obs.stacks:
        for thread in sample.threads:
            if (stats.os_thread_id is not None and thread.os_thread_id == stats.os_thread_id) or (
                stats.os_thread_id is None and thread.name == stats.name
            ):
                found.append(thread)
                break
    return found


def _sync_sites(ctx: Context, threads: tuple[ThreadStats, ...]) -> Counter[str]:
    sites: Counter[str] = Counter()
    for stats in threads:
        samples = _thread_samples(ctx, stats)
        if len(samples) == len(stats.timeline):
            chosen = [t for t, state in zip(samples, stats.timeline, strict=True) if state == ThreadState.GPU_WAIT]
        else:
            chosen = [t for t in samples if any(f.name in SYNC_NATIVE_FRAMES for f in t.frames)]
        for thread in chosen:
            frames = python_frames(thread)
            # The innermost frame outside torch is the user's line that forced the sync.
            user = next((f for f in frames if not is_library_file(f.filename)), frames[0] if frames else None)
            if user is not None:
                # The line's text shows which call synced (`.item()`, `.cpu()`): C calls leave no frame.
                text = ctx.line_text(user)
                sites[frame_site(user) + (f" `{text.strip()[:60]}`" if text else "")] += 1
    return sites
