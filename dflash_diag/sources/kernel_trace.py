"""Reading torch.profiler's Chrome traces: what `record --kernels` brought back from a process, and a trace file
given to `doctor --kernels-trace` (one `record --kernels` wrote, or one torch.profiler exported itself).

Bounded and strict: at most ``MAX_TRACE_BYTES`` read, at most ``MAX_SPANS`` spans kept (the earliest: the rest is
counted), names cut to ``MAX_NAME_CHARS``, only the categories of ``model.kernels.TRACE_CATS``, numbers finite.
A file that holds none of them is refused (exit 6): it is not a trace of torch.profiler. The program chose many of
the names (its annotations, its threads): every name and text argument goes through the process's redactor
(``sources.redaction``), like everything else the sources return.

The clock: torch.profiler's timestamps are Unix time in microseconds (from ``baseTimeNanoseconds``), read through
its approximate clock (the TSC, converted when the profiler started). The process marks both ends of a
recording with empty spans bracketed by its monotonic clock (``probes/kernels.py``): ``clock_map`` places the trace
on CLOCK_MONOTONIC, the clock our stack samples use, with half the narrowest bracket as its uncertainty and the two
ends' difference as its drift; an NTP step during the recording cannot skew it. Without marks, the wall clock.
"""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from dflash_diag.errors import CommandError, ExitCode
from dflash_diag.model.kernels import (
    GPU_CATS,
    LAUNCH_CATS,
    TRACE_CATS,
    ClockMap,
    KernelTrace,
    StepMark,
    TraceSpan,
)
from dflash_diag.sources.redaction import ProcessRedactor, redactor_for

MAX_TRACE_BYTES = 1 << 30
MAX_SPANS = 2_000_000
MAX_NAME_CHARS = 300
MAX_ARGS = 8
CLOCK_MARK_PREFIX = "dflash-diag clock "
# torch's own annotations that mark a step: `prof.step()` of a scheduled torch.profiler.profile.
PROFILER_STEP_PREFIX = "ProfilerStep#"
# The args kept on a GPU span for the trace a user opens (the launch geometry); the device, the stream and the
# correlation id are the span's own fields.
KEPT_ARGS = ("grid", "block", "registers per thread", "shared memory", "bytes", "memory bandwidth (GB/s)")
LINKED_CATS = GPU_CATS | LAUNCH_CATS  # the spans CUPTI's correlation id ties together


class KernelTraceError(CommandError):
    def __init__(self, message: str) -> None:
        super().__init__(message, ExitCode.BAD_INPUT)


def read_trace_file(path: Path, *, pid: int | None = None) -> KernelTrace:
    """A trace file given on the command line; KernelTraceError (exit 6) when it is not one we can use."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise KernelTraceError(f"cannot read the kernel trace {path}: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise KernelTraceError(f"the kernel trace {path} is not a regular file")
        if st.st_size > MAX_TRACE_BYTES:
            raise KernelTraceError(f"the kernel trace {path} is {st.st_size / 1e6:.0f} MB, over the "
                                   f"{MAX_TRACE_BYTES / 1e6:.0f} MB read: record a shorter window")
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(MAX_TRACE_BYTES + 1)
    finally:
        os.close(fd)
    if path.suffix == ".gz" or data[:2] == b"\x1f\x8b":
        raise KernelTraceError(f"{path} is compressed: gunzip it first")
    trace = parse_trace(data, source=str(path), redactor=redactor_for(pid) if pid is not None else None)
    if pid is not None and trace.pid is not None and trace.pid != pid:
        raise KernelTraceError(f"the kernel trace {path} is of PID {trace.pid}, not of PID {pid}")
    return trace


def _document(data: bytes, source: str) -> dict[str, Any]:
    def reject(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    try:
        doc = json.loads(data, parse_constant=reject)
    except (ValueError, RecursionError, UnicodeDecodeError):
        raise KernelTraceError(f"{source} is not JSON: not a Chrome trace of torch.profiler") from None
    if isinstance(doc, list):  # the array form of the Trace Event Format
        doc = {"traceEvents": doc}
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise KernelTraceError(f"{source} has no traceEvents: not a Chrome trace")
    return doc


def parse_trace(data: bytes, *, source: str, redactor: ProcessRedactor | None = None) -> KernelTrace:
    """torch.profiler's events of a Chrome trace (torch's own export, or `record --kernels`' output); names redacted
    by ``redactor`` (default: the rules alone)."""
    text = (redactor or ProcessRedactor()).text
    doc = _document(data, source)
    events = doc["traceEvents"]
    spans: list[TraceSpan] = []
    names: dict[int, str] = {}
    steps: list[StepMark] = []
    pids: dict[int, int] = {}
    for e in events:
        if not isinstance(e, dict):
            continue
        ph = e.get("ph")
        if ph == "M":
            _thread_name(e, names, text)
        elif ph == "X" and e.get("cat") in TRACE_CATS:
            span = _span(e, text)
            if span is None:
                continue
            if span.cat not in GPU_CATS and isinstance(e.get("pid"), int):
                pids[e["pid"]] = pids.get(e["pid"], 0) + 1
            if span.name.startswith(PROFILER_STEP_PREFIX):
                steps.append(StepMark(span.end_us, span.tid))
            spans.append(span)
        elif ph == "i" and e.get("cat") == "step" and _finite(e.get("ts")):
            tid = e.get("tid")
            steps.append(StepMark(float(e["ts"]), tid if isinstance(tid, int) else None))
    if not spans:
        raise KernelTraceError(f"{source} holds no torch.profiler events (no kernels, CUDA calls or CPU ops)")
    spans.sort(key=lambda s: (s.start_us, -s.dur_us))
    left_out = max(0, len(spans) - MAX_SPANS)
    if left_out:
        spans = spans[:MAX_SPANS]
    other = _mapping(doc.get("otherData"))
    pid = _int(other.get("pid"))
    if pid is None and pids:
        pid = max(pids, key=pids.__getitem__)
    base = doc.get("baseTimeNanoseconds")
    started = float(other["started_wall_s"]) if _finite(other.get("started_wall_s")) else None
    if started is None and isinstance(base, int) and spans:
        started = (base / 1e9) + spans[0].start_us / 1e6
    return KernelTrace(pid=pid, spans=tuple(spans), thread_names=names, steps=tuple(sorted(steps, key=lambda m: m.at_us)),
                       spans_left_out=left_out, source=source, started_wall_s=started,
                       base_wall_ns=base if isinstance(base, int) else None)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _number(value: Any) -> float | None:
    return float(value) if _finite(value) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _thread_name(e: Mapping[str, Any], names: dict[int, str], text: Callable[[str], str]) -> None:
    name = _mapping(e.get("args")).get("name")
    tid = _int(e.get("tid"))
    if e.get("name") == "thread_name" and tid is not None and isinstance(name, str):
        names.setdefault(tid, text(name[:MAX_NAME_CHARS]))


def _span(e: Mapping[str, Any], text: Callable[[str], str]) -> TraceSpan | None:
    """One of torch's complete events (its hot path: hundreds of thousands of them in a recording)."""
    ts, dur, name = _number(e.get("ts")), _number(e.get("dur")), e.get("name")
    if ts is None or dur is None or dur < 0 or not isinstance(name, str):
        return None
    args = _mapping(e.get("args"))
    cat = str(e["cat"])
    if cat in GPU_CATS:  # torch's own export: pid = the device, tid = the stream; ours keeps both in args
        device = _int(args.get("device"))
        device = _int(e.get("pid")) if device is None else device
        tid = _int(args.get("stream"))
        tid = _int(e.get("tid")) if tid is None else tid
    else:
        device, tid = None, _int(e.get("tid"))
    if tid is None:
        return None
    kept: list[tuple[str, str | int | float | bool]] = []
    if args and cat in GPU_CATS:  # the launch geometry is the GPU spans' (host spans carry ids only)
        for key in KEPT_ARGS:
            value = _arg(args.get(key), text) if key in args else None
            if value is not None:
                kept.append((key, value))
    corr = _int(args.get("correlation")) if cat in LINKED_CATS else None
    return TraceSpan(cat=cat, name=text(name[:MAX_NAME_CHARS]), start_us=ts, dur_us=dur, tid=tid, device=device,
                     correlation=corr, args=tuple(kept[:MAX_ARGS]))


def _arg(value: Any, text: Callable[[str], str]) -> str | int | float | bool | None:
    if isinstance(value, bool | int) or (isinstance(value, float) and math.isfinite(value)):
        return value
    if isinstance(value, str):
        return text(value[:MAX_NAME_CHARS])
    if isinstance(value, list) and len(value) <= 4 and all(isinstance(v, int) for v in value):
        return "x".join(str(v) for v in value)  # a launch's grid or block: [x, y, z]
    return None


# --- a recording `record --kernels` brought back ---------------------------------------------------------------


def recorded_trace(data: bytes, outcome: Mapping[str, Any], pid: int,
                   wall_minus_mono_s: float | None = None) -> tuple[KernelTrace, ClockMap]:
    """torch's trace of a recording, with the outcome's thread names and step marks, and its clock map
    (``wall_minus_mono_s``: this machine's wall - monotonic clock, for a trace without clock marks)."""
    redactor = redactor_for(pid)
    trace = parse_trace(data, source="record --kernels", redactor=redactor)
    clock = clock_map(trace, outcome.get("clock_marks"), wall_minus_mono_s)
    names = dict(trace.thread_names)
    threads = outcome.get("threads")
    if isinstance(threads, dict):
        for key, name in list(threads.items())[:4096]:
            if isinstance(key, str) and key.isdigit() and isinstance(name, str):
                names[int(key)] = redactor.text(name[:MAX_NAME_CHARS])
    steps = tuple(StepMark(clock.trace_us(mark[0] / 1e3), mark[1]) for mark in _step_marks(outcome.get("step_marks")))
    spans = tuple(s for s in trace.spans if not s.name.startswith(CLOCK_MARK_PREFIX))
    return KernelTrace(pid=pid, spans=spans, thread_names=names, steps=steps or trace.steps,
                       spans_left_out=trace.spans_left_out, source=trace.source, started_wall_s=trace.started_wall_s,
                       base_wall_ns=trace.base_wall_ns), clock


def _step_marks(raw: Any) -> list[tuple[int, int]]:
    if not isinstance(raw, list):
        return []
    return [(m[0], m[1]) for m in raw[:100_000]
            if isinstance(m, list) and len(m) >= 2 and _int(m[0]) is not None and _int(m[1]) is not None]


def clock_map(trace: KernelTrace, marks: Any, wall_minus_mono_s: float | None = None) -> ClockMap:
    """The trace's clock onto CLOCK_MONOTONIC, from the process's clock marks (see the module docstring)."""
    by_name = {s.name: s for s in trace.spans if s.name.startswith(CLOCK_MARK_PREFIX)}
    points: dict[str, list[tuple[float, float, float]]] = {}  # end -> (width µs, trace µs, offset µs)
    for mark in marks if isinstance(marks, list) else ():
        if not isinstance(mark, dict):
            continue
        span = by_name.get(str(mark.get("name")))
        before, after = _int(mark.get("mono_ns_before")), _int(mark.get("mono_ns_after"))
        if span is None or before is None or after is None or after < before:
            continue
        where = "end" if " end " in span.name else "start"
        mid_us = (before + after) / 2e3
        points.setdefault(where, []).append(((after - before) / 1e3, span.start_us, mid_us - span.start_us))
    chosen = [min(points[w]) for w in ("start", "end") if points.get(w)]
    if not chosen:
        return _wall_clock_map(trace, wall_minus_mono_s)
    width, at, offset = chosen[0]
    drift = 0.0
    if len(chosen) == 2 and chosen[1][1] > at:
        drift = (chosen[1][2] - offset) / (chosen[1][1] - at)
    return ClockMap(offset_us=offset, at_us=at, drift=drift, uncertainty_us=max(c[0] for c in chosen) / 2,
                    method="marks", marks=sum(len(v) for v in points.values()))


def _wall_clock_map(trace: KernelTrace, wall_minus_mono_s: float | None) -> ClockMap:
    """No marks: torch's timestamps are Unix time (base + µs); our wall - monotonic offset places them."""
    if trace.base_wall_ns is None or wall_minus_mono_s is None:
        return ClockMap(offset_us=0.0, method="none: no clock marks and no base time", uncertainty_us=None)
    return ClockMap(offset_us=trace.base_wall_ns / 1e3 - wall_minus_mono_s * 1e6, method="wall clock")

