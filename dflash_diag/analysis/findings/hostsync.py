"""Host-sync storms: the step waiting on the GPU at `.item()`, `.cpu()` or synchronize, many times per step.

Only syncs the program asked for count (a native sync frame, torch.cuda.synchronize, a line with `.item()`,
`bool(torch.isfinite(t))`, or a conversion such as `int(t)`, `float(t)`, `if t:` or `print(t)` the thread sits at in
C without the GIL in a process with CUDA loaded): a thread waiting in backward() or an op because the GPU is busy
(its launch queue full) is GPU-bound, which is healthy, and is shown as evidence only. CUDA's default sync spins:
a thread blocked on the GPU is on CPU, so its samples may have been read as native compute; the line it sits at
says what it waits for, and such samples count as syncs whatever state they were given. Under probes the ``syncs``
probe counts every sync per line (torch's sync debug mode): the lines it counts are evidence beside the samples."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from dflash_contract.board import ProbeName, SyncKeys
from dflash_diag.analysis.classify import host_sync_sample, is_gpu_sync_frame, is_gpu_sync_line, may_sync_line
from dflash_diag.analysis.findings._context import (
    Context,
    frame_site,
    items,
    lower_bound,
    num,
    pct,
    python_frames,
)
from dflash_diag.analysis.findings._registry import RuleSpec
from dflash_diag.analysis.findings.kernels import trace_evidence
from dflash_diag.model import Finding, Frame, GpuSample, Severity, Stage, ThreadState, ThreadStats
from dflash_diag.model.evidence import is_library_file
from dflash_diag.model.stacks import ThreadSample

# A stage whose threads sit in *explicit* host syncs (`.item()`, `.cpu()`, `.tolist()`, synchronize) a sixth of
# the time stops queueing GPU work ahead at each one: the GPU drains, then waits for the next launches. Occasional
# syncs (logging every N steps) stay far below. Sampled shares are compared at their one-sigma lower bound.
SYNC_WARNING_SHARE = 0.15
# Native frames that are a host<->device synchronisation.
SYNC_NATIVE_FRAMES = frozenset(
    {"cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cuStreamSynchronize",
     "cuCtxSynchronize", "cuEventSynchronize", "_local_scalar_dense", "_local_scalar_dense_cuda"}
)
SITES_SHOWN = 3
# Python frames a tensor's conversion to a host value runs in (`f"{t}"`, `print(t)`): the user's line above them is
# the one that reads the tensor.
_CONVERSION_FILES = ("torch/_tensor.py", "torch/_tensor_str.py")
# A GPU this busy is the bottleneck: a host thread waiting on it is GPU-bound, not losing time to syncs.
# NVML's utilisation is the share of time any kernel runs, so it also reads 99% for small models that keep a
# GPU fed at 165-240 W of 700 (the H200 casebook's healthy programs): power is shown, never a verdict.
GPU_SATURATED_PCT = 90.0

RULES = (RuleSpec("host-sync-storm", sampled=True),)


def check(ctx: Context) -> Iterator[Finding]:
    if ctx.on_cuda() is False:
        return  # `.item()` on a process that runs nothing on a GPU reads host memory: no device to wait on
    # Pipeline stages are judged as a whole; threads outside them one by one (an idle main thread must not
    # dilute a training thread that syncs all the time).
    groups: list[tuple[str, Stage, tuple[ThreadStats, ...]]] = [
        (stage, stage, ctx.stage_threads(stage)) for stage in (Stage.DRAFTER, Stage.TARGET) if ctx.stage_threads(stage)]
    groups += [(t.name, Stage.OTHER, (t,)) for t in ctx.stage_threads(Stage.OTHER)]
    measured = [(label, stage, threads, _waits(ctx, threads)) for label, stage, threads in groups]
    hot = [x for x in measured if lower_bound(x[3].explicit_share, x[3].n) >= SYNC_WARNING_SHARE]
    if not hot:
        return
    label, stage, threads, waits = max(hot, key=lambda x: x[3].explicit_share)
    share = waits.explicit_share
    evidence: list[tuple[str, str]] = [(f"{lbl} in explicit host syncs", pct(w.explicit_share))
                                       for lbl, _, _, w in measured if w.explicit_share > 0][:6]
    if waits.implicit_share > 0:
        evidence.append((f"{label} waiting on a busy GPU in ops (launch queue full)", pct(waits.implicit_share)))
    for site, n in waits.sites.most_common(SITES_SHOWN):
        evidence.append(("sync site", f"{site} ({n} samples)"))
    if waits.read_as_native:
        evidence.append(("of them read as native compute", f"{waits.read_as_native} samples: the thread spins on CPU "
                                                            "while it waits (CUDA's default sync)"))
    evidence.extend(counted_sync_evidence(ctx))
    where = f" at {waits.sites.most_common(1)[0][0]}" if waits.sites else ""
    who = ctx.names.threads(stage) if stage is not Stage.OTHER else label
    util = _gpu_util_pct(ctx, threads)
    if util is not None:
        evidence.append(("GPU utilisation", f"{util:.0f}% (NVML, mean over the window)"))
    traced = trace_evidence(ctx)
    if traced is not None:
        evidence.append(traced)
    power = _gpu_power(ctx, threads)
    if power is not None:
        evidence.append(("GPU power", f"{power[0]:.0f} W of its {power[1]:.0f} W limit (NVML, mean over the window)"))
    saturated = util is not None and util >= GPU_SATURATED_PCT
    claim = f"{who} wait on the GPU {pct(share)} of the time in host syncs{where}"
    if saturated:
        # NVML reads the GPU busy all the time: the stage may be GPU-bound and the syncs cost little, or the busy
        # time is tiny kernels between syncs (the H200 casebook's per-chunk .item() program read 99% at 251 W).
        # No cost is claimed (information), but the syncs stay the lead for the stage's time.
        claim += (f"; the GPU reads {util:.0f}% busy, so part of this may be GPU-bound time that the syncs do not "
                  "cost: remove them and compare")
    yield Finding(
        rule_id="host-sync-storm",
        severity=Severity.INFO if saturated else Severity.WARNING,
        claim=claim,
        evidence=tuple(evidence),
        remedy="Keep values on the device inside the step (no .item()/.cpu()/print of tensors per chunk), "
        "accumulate metrics on the GPU and read them every N steps; use non_blocking copies.",
        impact=share,
        stages=(stage,) if stage is not Stage.OTHER else (),
    )


@dataclass(frozen=True, slots=True)
class _Waits:
    n: int  # samples of the group
    explicit_share: float  # in a sync the program asked for: .item(), .cpu(), synchronize, a native sync frame
    implicit_share: float  # GPU wait read off a busy GPU (a full launch queue, backward at the device's pace)
    sites: Counter[str]  # the program's lines of the explicit syncs
    read_as_native: int = 0  # explicit-sync samples the classifier had called native compute (a spinning wait)


def _waits(ctx: Context, threads: tuple[ThreadStats, ...]) -> _Waits:
    n = explicit = implicit = native = 0
    sites: Counter[str] = Counter()
    cuda = _cuda_loaded(ctx)
    counted = counted_sync_sites(ctx)
    for stats in threads:
        rows = ctx.stats_rows(stats)
        aligned = len(rows) == stats.n_samples
        if not aligned:  # the states cannot be matched to the stacks: judge each sample by its own frames
            rows = [(t, ThreadState.GPU_WAIT) for t in _thread_samples(ctx, stats)]
        n += stats.n_samples
        for thread, state in rows:
            if state not in (ThreadState.GPU_WAIT, ThreadState.NATIVE):
                continue
            site = _explicit_site(ctx, thread, state, cuda, counted)
            if site is not None:
                explicit += 1
                sites[site] += 1
                native += state == ThreadState.NATIVE
            elif aligned and state == ThreadState.GPU_WAIT:  # read off a busy GPU; unaligned rows are not known waits
                implicit += 1
    return _Waits(n=n, explicit_share=explicit / n if n else 0.0, implicit_share=implicit / n if n else 0.0,
                  sites=sites, read_as_native=native)


def _explicit_site(ctx: Context, thread: ThreadSample, state: ThreadState, cuda: bool | None,
                   counted: frozenset[str] = frozenset()) -> str | None:
    """The program's line when the sample is in a sync it asked for, else None. ``state``: what the classifier
    said; a sample it called native compute counts when the line it sits at reads a tensor on the host, or when
    the syncs probe counted syncs at that very line (``counted``: an implicit one, `torch.bincount`, a boolean
    mask, that no reading of the line's text can tell)."""
    frames = python_frames(thread)
    # The innermost frame outside torch is the user's line that forced the sync.
    user = next((f for f in frames if not is_library_file(f.filename)), frames[0] if frames else None)
    text = ctx.line_text(user) if user is not None else None
    if user is not None and counted and _probe_site(user) in counted:
        return _site_text(user, text) + " (syncs counted there)"
    native_sync = (any(f.name in SYNC_NATIVE_FRAMES for f in thread.frames if f.native)
                   or any(is_gpu_sync_frame(f) for f in frames[:3]))
    at_user_line = user is not None and all(f is user or _is_conversion_frame(f) for f in frames[: frames.index(user)])
    if state == ThreadState.GPU_WAIT:
        explicit = native_sync or (text is not None and (
            is_gpu_sync_line(text) or (at_user_line and cuda is not False and may_sync_line(text))))
    else:  # native: spinning in a sync is on CPU; only the line can say so (a native sync frame made it a GPU wait)
        explicit = at_user_line and host_sync_sample(thread, text, cuda=cuda)
    if not explicit:
        return None
    if user is None:
        return "?"
    return _site_text(user, text)


def _site_text(user: Frame, text: str | None) -> str:
    """The sync's line, with its text: it shows which call synced (`.item()`, `.cpu()`); C calls leave no frame."""
    return frame_site(user) + (f" `{text.strip()[:60]}`" if text else "")


def _cuda_loaded(ctx: Context) -> bool | None:
    """Whether the process runs CUDA (the board says so) or has its driver loaded (/proc/PID/maps), as the
    classifier reads it: a conversion in C without the GIL is a tensor's read only then."""
    on = ctx.on_cuda()
    if on is not None:
        return on
    facts = ctx.obs.process
    return facts.cuda_in_use if facts is not None else None


def _is_conversion_frame(frame: Frame) -> bool:
    path = frame.filename.replace("\\", "/")
    return any(path.endswith(suffix) for suffix in _CONVERSION_FILES)


# A line the syncs probe counted at least this many syncs at is a sync site (one stray sync at start-up is not).
COUNTED_SITE_MIN = 10


def counted_sync_sites(ctx: Context) -> frozenset[str]:
    """The lines the syncs probe counted syncs at (``dir/file.py:line``, as the probe names them)."""
    payload = ctx.probe(ProbeName.SYNCS)
    rows = [x for x in items(payload, SyncKeys.TOP_LINES) if isinstance(x, dict)] if payload is not None else []
    return frozenset(str(x.get(SyncKeys.SITE)) for x in rows
                     if isinstance(x.get(SyncKeys.COUNT), int) and x[SyncKeys.COUNT] >= COUNTED_SITE_MIN)


def _probe_site(frame: Frame) -> str:
    """A frame's line as the syncs probe names it: the last two parts of its path, then the line."""
    parts = frame.filename.replace("\\", "/").split("/")
    return f"{'/'.join(parts[-2:])}:{frame.line}"


def counted_sync_evidence(ctx: Context) -> list[tuple[str, str]]:
    """What the ``syncs`` probe counted (torch's sync debug mode, per line): the rate and the busiest lines."""
    payload = ctx.probe(ProbeName.SYNCS)
    if payload is None:
        return []
    rate = num(payload, SyncKeys.PER_S)
    lines = [x for x in items(payload, SyncKeys.TOP_LINES) if isinstance(x, dict)]
    out: list[tuple[str, str]] = []
    if rate is not None:
        out.append(("host syncs counted (syncs probe)", f"{rate:.0f}/s"))
    for line in lines[:SITES_SHOWN]:
        out.append(("counted sync line", f"{line.get(SyncKeys.SITE)} in {line.get(SyncKeys.THREAD)}: "
                                           f"{line.get(SyncKeys.COUNT)} syncs"))
    return out


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
