"""py-spy's ``dump --json`` output, parsed strictly into :mod:`dflash_diag.model` objects.

py-spy's output is untrusted input (another process's memory, read while it changes): any deviation from the
layout we know is a :class:`PySpyOutputError`, and sizes are bounded. Recorded dumps (tests/fixtures/*/) are
validated the same way by :func:`load_recorded_dumps`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dflash_contract.board import loads_strict
from dflash_diag.errors import DflashDiagError, ExitCode
from dflash_diag.model import Frame, StackSample, ThreadSample
from dflash_diag.model.text import printable

# Bounds on what we accept from py-spy: generous for real processes, small enough to keep memory bounded.
MAX_OUTPUT_BYTES = 64 * 1024 * 1024
MAX_THREADS = 4096
MAX_FRAMES = 4096
MAX_STR = 8192


class PySpyOutputError(DflashDiagError):
    """py-spy printed something that is not the ``dump --json`` layout we know."""

    exit_code = ExitCode.BAD_INPUT



def _req(obj: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str, *, in_range: bool = True) -> Any:
    if key not in obj:
        raise PySpyOutputError(f"py-spy output: {where} lacks {key!r}")
    return _check(obj[key], kind, f"{where}.{key}", in_range=in_range)


def _check(value: Any, kind: type | tuple[type, ...], where: str, *, in_range: bool = True) -> Any:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    # bool is an int in Python; py-spy never sends a bool where it means a number.
    if isinstance(value, bool) and bool not in kinds:
        raise PySpyOutputError(f"py-spy output: {where} is a bool, expected {_names(kinds)}")
    if not isinstance(value, kinds):
        raise PySpyOutputError(f"py-spy output: {where} is {type(value).__name__}, expected {_names(kinds)}")
    if isinstance(value, str) and len(value) > MAX_STR:
        raise PySpyOutputError(f"py-spy output: {where} is longer than {MAX_STR} characters")
    if in_range and isinstance(value, int) and not isinstance(value, bool) and not (0 <= value < 2**64):
        raise PySpyOutputError(f"py-spy output: {where} = {value} is out of range")
    return value


def _names(kinds: tuple[type, ...]) -> str:
    return " or ".join("null" if k is type(None) else k.__name__ for k in kinds)


def parse_frame(raw: Any, where: str) -> Frame:
    if not isinstance(raw, dict):
        raise PySpyOutputError(f"py-spy output: {where} is not an object")
    name = _req(raw, "name", str, where)
    filename = _req(raw, "filename", str, where)
    line = _req(raw, "line", int, where, in_range=False)
    # A nonblocking dump can read a line table the process is rewriting and report nonsense such as -60417:
    # the frame is still real, its line is unknown (0).
    line = line if 0 <= line < 2**31 else 0
    module = _check(raw.get("module"), (str, type(None)), f"{where}.module")
    # py-spy sets ``module`` (the shared library) only on native frames; Python frames carry null.
    # Names come from the inspected program: made printable here, so no screen or report shows raw escapes.
    return Frame(name=printable(name), filename=printable(filename), line=line, native=module is not None,
                 module=module)


def _printable_or_none(text: str | None) -> str | None:
    return None if text is None else printable(text)


def parse_thread(raw: Any, where: str) -> ThreadSample:
    if not isinstance(raw, dict):
        raise PySpyOutputError(f"py-spy output: {where} is not an object")
    frames_raw = _req(raw, "frames", list, where)
    if len(frames_raw) > MAX_FRAMES:
        raise PySpyOutputError(f"py-spy output: {where} has {len(frames_raw)} frames (limit {MAX_FRAMES})")
    return ThreadSample(
        thread_id=_req(raw, "thread_id", int, where),
        os_thread_id=_check(raw.get("os_thread_id"), (int, type(None)), f"{where}.os_thread_id"),
        name=_printable_or_none(_check(raw.get("thread_name"), (str, type(None)), f"{where}.thread_name")),
        active=_req(raw, "active", bool, where),
        owns_gil=_req(raw, "owns_gil", bool, where),
        frames=tuple(parse_frame(f, f"{where}.frames[{i}]") for i, f in enumerate(frames_raw)),
    )


def parse_dump(
    text: str | bytes,
    *,
    pid: int,
    monotonic_s: float,
    wall_s: float,
    duration_s: float,
    native: bool,
) -> StackSample:
    """Parse ``py-spy dump --json`` output, refusing anything malformed, foreign or oversized."""
    if len(text) > MAX_OUTPUT_BYTES:
        raise PySpyOutputError(f"py-spy output is larger than {MAX_OUTPUT_BYTES} bytes")
    try:
        doc = loads_strict(text)  # no NaN/Infinity/1e999, bounded nesting: the one strict JSON reader
    except ValueError as exc:
        raise PySpyOutputError(f"py-spy output is not JSON: {exc}") from None
    return stack_sample_from_json(doc, pid=pid, monotonic_s=monotonic_s, wall_s=wall_s, duration_s=duration_s,
                                  native=native)


def stack_sample_from_json(
    doc: Any, *, pid: int, monotonic_s: float, wall_s: float, duration_s: float, native: bool
) -> StackSample:
    """Build a StackSample from an already-decoded ``dump --json`` document (recorded fixtures use this too)."""
    if not isinstance(doc, list):
        raise PySpyOutputError(f"py-spy output: expected a list of threads, got {type(doc).__name__}")
    if len(doc) > MAX_THREADS:
        raise PySpyOutputError(f"py-spy output: {len(doc)} threads (limit {MAX_THREADS})")
    threads = []
    for i, raw in enumerate(doc):
        where = f"thread[{i}]"
        if isinstance(raw, dict) and "pid" in raw:
            got = _check(raw["pid"], int, f"{where}.pid")
            if got != pid:
                raise PySpyOutputError(f"py-spy output: {where} belongs to PID {got}, not {pid}")
        threads.append(parse_thread(raw, where))
    return StackSample(pid=pid, monotonic_s=monotonic_s, wall_s=wall_s, duration_s=duration_s, native=native,
                       threads=tuple(threads))


def load_recorded_dumps(path: str | Path, *, start_monotonic_s: float = 0.0, spacing_s: float = 0.2,
                        start_wall_s: float = 1_764_412_345.0) -> tuple[StackSample, ...]:
    """Recorded dumps (``[{"native": bool, "seconds": float, "dump": [...]}, ...]``, as in tests/fixtures/*/)
    as StackSamples, ``spacing_s`` apart: for tests, replays and offline analysis. Validated like live output."""
    try:
        doc = loads_strict(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PySpyOutputError(f"{path}: cannot read recorded dumps: {exc}") from None
    if not isinstance(doc, list):
        raise PySpyOutputError(f"{path}: expected a list of recorded dumps")
    out = []
    for i, entry in enumerate(doc):
        if not isinstance(entry, dict) or not isinstance(entry.get("dump"), list) or not entry["dump"]:
            raise PySpyOutputError(f"{path}: entry {i} has no dump")
        first = entry["dump"][0]
        pid = first.get("pid") if isinstance(first, dict) else None
        if not isinstance(pid, int) or isinstance(pid, bool):
            raise PySpyOutputError(f"{path}: entry {i} has no pid")
        seconds = entry.get("seconds", 0.0)
        out.append(stack_sample_from_json(
            entry["dump"], pid=pid, monotonic_s=start_monotonic_s + i * spacing_s,
            wall_s=start_wall_s + i * spacing_s,
            duration_s=float(seconds) if isinstance(seconds, int | float) else 0.0,
            native=bool(entry.get("native", False)),
        ))
    return tuple(out)
