"""Plain-text formatting of frame parts (no rich, no Textual): shared by the TUI widgets and batch mode, so both
say the same thing."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from dflash_contract.board import (
    STATUS_OK,
    AllocatorKeys,
    CheckpointKeys,
    CodedriftKeys,
    CompileKeys,
    CudagraphsKeys,
    FastpathKeys,
    GilKeys,
    PayloadKeys,
    ProbeName,
    QueueKeys,
    ThreadsKeys,
    is_stale,
)
from dflash_diag.model import (
    NA,
    Board,
    Frame,
    GpuSample,
    Maybe,
    PipelineView,
    StageNames,
    ThreadState,
    ThreadStats,
)
from dflash_diag.model.stats import stage_names

# Display order: where the time went, busiest-looking states first, idle last.
STATE_ORDER: tuple[ThreadState, ...] = (
    ThreadState.PYTHON,
    ThreadState.NATIVE,
    ThreadState.GPU_WAIT,
    ThreadState.GIL_WAIT,
    ThreadState.QUEUE_PUT,
    ThreadState.QUEUE_GET,
    ThreadState.COMPILE,
    ThreadState.CHECKPOINT,
    ThreadState.IDLE,
)

# One letter per state so the strip reads without colour too (and in tests).
STATE_CHAR: Mapping[ThreadState, str] = {
    ThreadState.PYTHON: "P",
    ThreadState.NATIVE: "N",
    ThreadState.GPU_WAIT: "G",
    ThreadState.GIL_WAIT: "W",
    ThreadState.QUEUE_PUT: ">",
    ThreadState.QUEUE_GET: "<",
    ThreadState.COMPILE: "C",
    ThreadState.CHECKPOINT: "K",
    ThreadState.IDLE: ".",
}

STATE_STYLE: Mapping[ThreadState, str] = {
    ThreadState.PYTHON: "bold green",
    ThreadState.NATIVE: "bold blue",
    ThreadState.GPU_WAIT: "bold magenta",
    ThreadState.GIL_WAIT: "bold red",
    ThreadState.QUEUE_PUT: "bold yellow",
    ThreadState.QUEUE_GET: "bold cyan",
    ThreadState.COMPILE: "bold bright_magenta",
    ThreadState.CHECKPOINT: "bold dark_orange",
    ThreadState.IDLE: "grey50",
}

# Short column headers for the per-state percentage columns.
STATE_SHORT: Mapping[ThreadState, str] = {
    ThreadState.PYTHON: "py",
    ThreadState.NATIVE: "nat",
    ThreadState.GPU_WAIT: "gpu",
    ThreadState.GIL_WAIT: "gilW",
    ThreadState.QUEUE_PUT: "put",
    ThreadState.QUEUE_GET: "get",
    ThreadState.COMPILE: "cmp",
    ThreadState.CHECKPOINT: "ckpt",
    ThreadState.IDLE: "idle",
}


def names_of(pipeline: Maybe[PipelineView], threads: tuple[ThreadStats, ...] = ()) -> StageNames:
    """The words a screen uses for the stages: the pipeline view's, else those the threads' names give."""
    return pipeline.names if isinstance(pipeline, PipelineView) else stage_names(threads)


def rate_note(requested_hz: float | None, rate_hz: float, reason: str) -> str:
    """Why the sampling rate is what it is: "auto: 3.1 idle cores", "asked 5, adaptive: py-spy dumps cost...";
    empty when an asked rate is simply in force."""
    if requested_hz is None:
        return reason if reason.startswith("auto") else f"auto, {reason}" if reason else "auto"
    if requested_hz - rate_hz > 0.05:
        return f"asked {requested_hz:g}, adaptive" + (f": {reason}" if reason else "")
    return ""


def pct(share: float | None) -> str:
    """A 0..1 share as a compact percentage ("62%", "0.4%", "-")."""
    if share is None or (isinstance(share, float) and math.isnan(share)):
        return "-"
    value = 100.0 * share
    if value == 0:
        return "0%"
    return f"{value:.1f}%" if value < 9.95 else f"{value:.0f}%"


def maybe(value: Maybe[Any], fmt: str = "{:.1f}", na: str = "n/a") -> str:
    """Format a possibly-NA reading; NA shows as ``na`` (the reason is shown elsewhere)."""
    if isinstance(value, NA) or value is None:
        return na
    return fmt.format(value)


def dominant(shares: Mapping[ThreadState, float]) -> tuple[ThreadState, float] | None:
    """The state holding the largest share, if any sample was taken."""
    if not shares:
        return None
    state = max(STATE_ORDER, key=lambda s: shares.get(s, 0.0))
    share = shares.get(state, 0.0)
    return (state, share) if share > 0 else None


def frame_text(frame: Frame) -> str:
    where = f"{frame.short_filename}:{frame.line}" if frame.line else frame.short_filename
    return f"{frame.name} ({where})"


def top_frame_text(stats: ThreadStats) -> str:
    return frame_text(stats.top_frame) if stats.top_frame is not None else "-"


def board_age_text(board: Maybe[Board], now_wall_s: float) -> str:
    """ "board seq 17, 0.4 s old" or the staleness warning users act on ("no update for 42 s")."""
    if isinstance(board, NA):
        return str(board)
    age_s = board.age_s(now_wall_s)
    # The one staleness rule of every reader (docs/board.md): missed publishes mean stuck or stopped probing.
    if is_stale(age_s, board.interval_s):
        return f"board seq {board.seq}: no update for {age_s:.0f} s (hung, or probes stopped?)"
    return f"board seq {board.seq}, {age_s:.1f} s old"


def _fmt_bytes(value: Maybe[int]) -> str:
    if isinstance(value, NA):
        return "n/a"
    return f"{value / 2**30:.1f}G"


def gpu_line(gpu: GpuSample) -> str:
    """One GPU on one line: utilisation, memory, power, SM clock."""
    mem = f"{_fmt_bytes(gpu.memory_used_bytes)}/{_fmt_bytes(gpu.memory_total_bytes)}"
    power = f"{maybe(gpu.power_w, '{:.0f}')}/{maybe(gpu.power_limit_w, '{:.0f}')}W"
    clock = f"{maybe(gpu.sm_clock_mhz, '{:d}')}/{maybe(gpu.max_sm_clock_mhz, '{:d}')}MHz"
    return f"GPU{gpu.index} {gpu.name}  util {maybe(gpu.util_pct, '{:.0f}%')}  mem {mem}  {power}  SM {clock}"


def gpu_compact_line(gpu: GpuSample) -> str:
    """One GPU in one short line, for the at-a-glance row."""
    mem = f"{_fmt_bytes(gpu.memory_used_bytes)}/{_fmt_bytes(gpu.memory_total_bytes)}"
    throttle = gpu.throttle_reasons
    throttled = "" if isinstance(throttle, NA) or not throttle else f"  THROTTLED: {', '.join(throttle)}"
    return (
        f"GPU{gpu.index} {maybe(gpu.util_pct, '{:.0f}%'):>4}  {mem}  {maybe(gpu.power_w, '{:.0f}W')}"
        f"  {maybe(gpu.sm_clock_mhz, '{:d}MHz')}{throttled}"
    )


def gpu_detail_lines(gpu: GpuSample, pid: int, threads: tuple[ThreadStats, ...]) -> list[str]:
    """Throttle reasons, which of our threads use this device, and per-process utilisation."""
    lines = [gpu_line(gpu)]
    if isinstance(gpu.throttle_reasons, NA):
        lines.append(f"  throttle: {gpu.throttle_reasons}")
    else:
        lines.append(f"  throttle: {', '.join(gpu.throttle_reasons) or 'none'}")
    users = [t.name for t in threads if t.gpu_index == gpu.index]
    lines.append(f"  threads: {', '.join(users) if users else 'none known'}")
    if isinstance(gpu.processes, NA):
        lines.append(f"  processes: {gpu.processes}")
    else:
        for proc in gpu.processes:
            mark = " (this process)" if proc.pid == pid else ""
            lines.append(
                f"  pid {proc.pid}{mark}: SM {maybe(proc.sm_util_pct, '{:.0f}%')}  mem {_fmt_bytes(proc.used_memory_bytes)}"
            )
    return lines


def probe_summary(board: Maybe[Board]) -> list[tuple[str, str]]:
    """(probe, one-line reading) for every probe on the board, in a fixed order; N/A probes say why."""
    if isinstance(board, NA):
        return [("probes", str(board))]
    rows: list[tuple[str, str]] = []
    for name in _PROBE_FORMATTERS:
        raw = board.probes.get(name)
        if raw is None and name == ProbeName.THREADS:
            continue  # newer than most boards: no row rather than a "not published" one
        if raw is None:
            rows.append((name, "not published"))
            continue
        if raw.get(PayloadKeys.STATUS) != STATUS_OK:
            rows.append((name, f"N/A: {raw.get(PayloadKeys.REASON, raw.get(PayloadKeys.STATUS, '?'))}"))
            continue
        rows.append((name, _PROBE_FORMATTERS[name](raw)))
    return rows


def _num(payload: Mapping[str, Any], key: str, default: float = 0.0) -> float:
    value = payload.get(key, default)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default


def _fmt_gil(p: Mapping[str, Any]) -> str:
    return (
        f"contention {pct(_num(p, GilKeys.CONTENTION_SHARE))}, wait mean {_num(p, GilKeys.WAIT_MEAN_MS):.1f} ms"
        f" p99 {_num(p, GilKeys.WAIT_P99_MS):.1f} ms"
    )


def _fmt_allocator(p: Mapping[str, Any]) -> str:
    devices = p.get(AllocatorKeys.DEVICES) or {}
    if not isinstance(devices, Mapping) or not devices:
        return "no devices"
    parts = []
    for dev, d in sorted(devices.items()):
        if not isinstance(d, Mapping):
            continue
        parts.append(
            f"cuda:{dev} {_num(d, AllocatorKeys.DEVICE_ALLOC_PER_S):.1f} malloc/s, retries {int(_num(d, AllocatorKeys.ALLOC_RETRIES))},"
            f" frag {pct(_num(d, AllocatorKeys.FRAGMENTATION_SHARE))}"
        )
    return "; ".join(parts)


def _fmt_compile(p: Mapping[str, Any]) -> str:
    now = " COMPILING NOW" if p.get(CompileKeys.COMPILING_NOW) else ""
    return (
        f"{int(_num(p, CompileKeys.COMPILES))} compiles, {int(_num(p, CompileKeys.RECOMPILES))} recompiles,"
        f" {int(_num(p, CompileKeys.GRAPH_BREAKS))} graph breaks, {int(_num(p, CompileKeys.RECOMPILE_LIMIT_HITS))} limit hits{now}"
    )


def _fmt_cudagraphs(p: Mapping[str, Any]) -> str:
    text = (
        f"{int(_num(p, CudagraphsKeys.CAPTURES))} captures, {int(_num(p, CudagraphsKeys.REPLAYS))} replays,"
        f" {int(_num(p, CudagraphsKeys.SKIPS))} skips, {int(_num(p, CudagraphsKeys.RERECORDS))} re-records"
    )
    hazard = p.get(CudagraphsKeys.MULTI_THREAD_HAZARD)
    return f"{text}; hazard: {hazard}" if hazard else text


def _fmt_fastpath(p: Mapping[str, Any]) -> str:
    fast = p.get(FastpathKeys.GDN_FAST_PATH)
    kernels = p.get(FastpathKeys.GDN_KERNELS)
    if fast is True:
        gdn = "GDN fast path"
    elif fast is False:
        gdn = f"GDN SLOW fallback ({p.get(FastpathKeys.GDN_REASON, '?')})"
    elif not kernels:
        # The probe found no GatedDeltaNet module loaded (``gdn_kernels: {}``): nothing can be slow, whatever fla is.
        gdn = "no GatedDeltaNet model"
    else:
        gdn = f"GDN kernel not known ({p.get(FastpathKeys.GDN_REASON, '?')})"
    return f"{gdn}; flex_attention {p.get(FastpathKeys.FLEX_ATTENTION, '?')}"


def _fmt_codedrift(p: Mapping[str, Any]) -> str:
    stale = p.get(CodedriftKeys.STALE) or []
    if not isinstance(stale, list) or not stale:
        return f"no stale code ({int(_num(p, CodedriftKeys.CHECKED_MODULES))} modules checked)"
    names = [str(s.get(CodedriftKeys.MODULE, "?")) for s in stale if isinstance(s, Mapping)]
    return f"STALE: {', '.join(names[:3])}{' ...' if len(names) > 3 else ''} changed on disk since import"


def _fmt_checkpoint(p: Mapping[str, Any]) -> str:
    calls = p.get(CheckpointKeys.CALLS) or {}
    reentrant = int(_num(calls, CheckpointKeys.REENTRANT)) if isinstance(calls, Mapping) else 0
    non = int(_num(calls, CheckpointKeys.NON_REENTRANT)) if isinstance(calls, Mapping) else 0
    return (
        f"reentrant {reentrant}, non-reentrant {non}, params with grad None {int(_num(p, CheckpointKeys.GRAD_NONE_COUNT))}"
    )


def _fmt_queues(p: Mapping[str, Any]) -> str:
    parts = []
    for name, q in sorted(p.items()):
        if name == "status" or not isinstance(q, Mapping):
            continue
        parts.append(f"{name} {int(_num(q, QueueKeys.DEPTH))}/{int(_num(q, QueueKeys.MAXSIZE))}")
    return ", ".join(parts) or "no queues"


def _fmt_threads(p: Mapping[str, Any]) -> str:
    deaths = p.get(ThreadsKeys.DEATHS) if isinstance(p.get(ThreadsKeys.DEATHS), list) else []
    text = f"{int(_num(p, ThreadsKeys.ALIVE))} alive, {int(_num(p, ThreadsKeys.DEATHS_TOTAL))} died"
    last = deaths[-1] if deaths and isinstance(deaths[-1], Mapping) else None
    if last is not None:
        text += f" (last: {last.get(ThreadsKeys.THREAD)}: {str(last.get(ThreadsKeys.EXCEPTION))[:60]})"
    return text


# Display order of the probes pane (the names are the contract's).
_PROBE_FORMATTERS = {
    ProbeName.GIL: _fmt_gil,
    ProbeName.ALLOCATOR: _fmt_allocator,
    ProbeName.COMPILE: _fmt_compile,
    ProbeName.CUDAGRAPHS: _fmt_cudagraphs,
    ProbeName.FASTPATH: _fmt_fastpath,
    ProbeName.CODEDRIFT: _fmt_codedrift,
    ProbeName.CHECKPOINT: _fmt_checkpoint,
    ProbeName.QUEUES: _fmt_queues,
    ProbeName.THREADS: _fmt_threads,
}
