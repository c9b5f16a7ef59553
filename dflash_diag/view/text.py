"""Plain-text formatting of frame parts (no rich, no Textual): shared by the TUI widgets and batch mode, so both
say the same thing."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from dflash_diag.model import NA, Board, Frame, GpuSample, Maybe, ThreadState, ThreadStats

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
    # A writer publishes every interval_s; several missed publishes means the process is stuck or stopped probing.
    if age_s > max(5.0, 4 * board.interval_s):
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
    for name in (
        "gil",
        "allocator",
        "compile",
        "cudagraphs",
        "fastpath",
        "codedrift",
        "checkpoint",
        "queues",
    ):
        raw = board.probes.get(name)
        if raw is None:
            rows.append((name, "not published"))
            continue
        if raw.get("status") != "ok":
            rows.append((name, f"N/A: {raw.get('reason', raw.get('status', '?'))}"))
            continue
        rows.append((name, _PROBE_FORMATTERS[name](raw)))
    return rows


def _num(payload: Mapping[str, Any], key: str, default: float = 0.0) -> float:
    value = payload.get(key, default)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default


def _fmt_gil(p: Mapping[str, Any]) -> str:
    return (
        f"contention {pct(_num(p, 'contention_share'))}, wait mean {_num(p, 'wait_mean_ms'):.1f} ms"
        f" p99 {_num(p, 'wait_p99_ms'):.1f} ms"
    )


def _fmt_allocator(p: Mapping[str, Any]) -> str:
    devices = p.get("devices") or {}
    if not isinstance(devices, Mapping) or not devices:
        return "no devices"
    parts = []
    for dev, d in sorted(devices.items()):
        if not isinstance(d, Mapping):
            continue
        parts.append(
            f"cuda:{dev} {_num(d, 'device_alloc_per_s'):.1f} malloc/s, retries {int(_num(d, 'alloc_retries'))},"
            f" frag {pct(_num(d, 'fragmentation_share'))}"
        )
    return "; ".join(parts)


def _fmt_compile(p: Mapping[str, Any]) -> str:
    now = " COMPILING NOW" if p.get("compiling_now") else ""
    return (
        f"{int(_num(p, 'compiles'))} compiles, {int(_num(p, 'recompiles'))} recompiles,"
        f" {int(_num(p, 'graph_breaks'))} graph breaks, {int(_num(p, 'recompile_limit_hits'))} limit hits{now}"
    )


def _fmt_cudagraphs(p: Mapping[str, Any]) -> str:
    text = (
        f"{int(_num(p, 'captures'))} captures, {int(_num(p, 'replays'))} replays,"
        f" {int(_num(p, 'skips'))} skips, {int(_num(p, 'rerecords'))} re-records"
    )
    hazard = p.get("multi_thread_hazard")
    return f"{text}; hazard: {hazard}" if hazard else text


def _fmt_fastpath(p: Mapping[str, Any]) -> str:
    gdn = "GDN fast path" if p.get("gdn_fast_path") else f"GDN SLOW fallback ({p.get('gdn_reason', '?')})"
    return f"{gdn}; flex_attention {p.get('flex_attention', '?')}"


def _fmt_codedrift(p: Mapping[str, Any]) -> str:
    stale = p.get("stale") or []
    if not isinstance(stale, list) or not stale:
        return f"no stale code ({int(_num(p, 'checked_modules'))} modules checked)"
    names = [str(s.get("module", "?")) for s in stale if isinstance(s, Mapping)]
    return f"STALE: {', '.join(names[:3])}{' ...' if len(names) > 3 else ''} changed on disk since import"


def _fmt_checkpoint(p: Mapping[str, Any]) -> str:
    calls = p.get("calls") or {}
    reentrant = int(_num(calls, "reentrant")) if isinstance(calls, Mapping) else 0
    non = int(_num(calls, "non_reentrant")) if isinstance(calls, Mapping) else 0
    return (
        f"reentrant {reentrant}, non-reentrant {non}, params with grad None {int(_num(p, 'grad_none_count'))}"
    )


def _fmt_queues(p: Mapping[str, Any]) -> str:
    parts = []
    for name, q in sorted(p.items()):
        if name == "status" or not isinstance(q, Mapping):
            continue
        parts.append(f"{name} {int(_num(q, 'depth'))}/{int(_num(q, 'maxsize'))}")
    return ", ".join(parts) or "no queues"


_PROBE_FORMATTERS = {
    "gil": _fmt_gil,
    "allocator": _fmt_allocator,
    "compile": _fmt_compile,
    "cudagraphs": _fmt_cudagraphs,
    "fastpath": _fmt_fastpath,
    "codedrift": _fmt_codedrift,
    "checkpoint": _fmt_checkpoint,
    "queues": _fmt_queues,
}
