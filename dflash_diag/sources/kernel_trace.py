"""Reading torch.profiler's Chrome traces: what `record --kernels` brought back from a process, and a trace file
given to `doctor --kernels-trace` (one `record --kernels` wrote, or one torch.profiler exported itself).

Traces come from other people: every one is read as hostile input, like a bundle given to `diff`.

- **Files**: opened without blocking (a FIFO or a device is refused, never waited on), regular files only, at most
  ``MAX_TRACE_BYTES``.
- **Bounded memory**: the document is read as a stream (``sources.json_stream``), one event at a time; what is kept
  is at most ``MAX_SPANS`` spans (the earliest: the rest is counted), ``MAX_THREAD_NAMES`` thread names and
  ``MAX_STEPS`` step marks. Reading costs what is kept (about 200 bytes a span: docs/integrations.md), not the size of
  the file; an event longer than ``MAX_EVENT_CHARS``, or another top-level value longer than ``MAX_VALUE_CHARS``,
  refuses the file.
- **Typed and bounded values**: only the categories of ``model.kernels.TRACE_CATS`` (a string: a ``cat`` that is a
  list is no category), names and text arguments strings, times finite and within ``MAX_ABS_US`` of zero,
  durations within ``MAX_DUR_US``, ids integers within 64 bits: an event that breaks one of these is skipped. A
  401-digit integer or ``1e308`` is a value out of range here, never an overflow.
- **Names redacted, then cut**: the program chose many of them (its annotations, its threads): every name and text
  argument goes through the process's redactor (``sources.redaction``) and is cut to ``MAX_NAME_CHARS`` after (cut
  first, a password just past the cut would keep its first part).

A file that holds no event of torch.profiler is refused (exit 6): it is not a trace of torch.profiler.

The clock: torch.profiler's timestamps are Unix time in microseconds (from ``baseTimeNanoseconds``), read through
its approximate clock (the TSC, converted when the profiler started). The process marks both ends of a
recording with empty spans bracketed by its monotonic clock (``probes/kernels.py``): ``clock_map`` places the trace
on CLOCK_MONOTONIC, the clock our stack samples use, with half the narrowest bracket as its uncertainty and the two
ends' difference as its drift; an NTP step during the recording cannot skew it. Without marks, the wall clock.
"""

from __future__ import annotations

import io
import math
import os
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, BinaryIO

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
from dflash_diag.sources.json_stream import ARRAY_START, JsonStreamError, iter_document
from dflash_diag.sources.redaction import ProcessRedactor, redactor_for

MAX_TRACE_BYTES = 1 << 30
MAX_SPANS = 1_000_000
MAX_THREAD_NAMES = 4096
MAX_STEPS = 100_000
MAX_PIDS_COUNTED = 1024
MAX_EVENT_CHARS = 1 << 20  # one event of torch's is a few hundred bytes; its args with shapes a few KB
MAX_VALUE_CHARS = 64 << 20  # deviceProperties, otherData (our own trace's findings and summary)
MAX_NAME_CHARS = 300
RAW_NAME_CHARS = 4 * MAX_NAME_CHARS  # what is redacted of a name before it is cut
MAX_ARGS = 8
MAX_ABS_US = 1e17  # ~3,000 years around 1970 in microseconds: any real clock, never an overflow
MAX_DUR_US = 1e13  # ~115 days
MAX_ID = (1 << 63) - 1
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
        # O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused right after, not being a file)
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        raise KernelTraceError(f"cannot read the kernel trace {path}: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise KernelTraceError(f"the kernel trace {path} is not a regular file")
        if st.st_size > MAX_TRACE_BYTES:
            raise KernelTraceError(f"the kernel trace {path} is {st.st_size / 1e6:.0f} MB, over the "
                                   f"{MAX_TRACE_BYTES / 1e6:.0f} MB read: record a shorter window")
        os.set_blocking(fd, True)
        with os.fdopen(os.dup(fd), "rb") as fh:
            if path.suffix == ".gz" or fh.read(2) == b"\x1f\x8b":
                raise KernelTraceError(f"{path} is compressed: gunzip it first")
            fh.seek(0)
            trace = parse_trace(_Bounded(fh, MAX_TRACE_BYTES), source=str(path),
                                redactor=redactor_for(pid) if pid is not None else None)
    except OSError as exc:
        raise KernelTraceError(f"cannot read the kernel trace {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if pid is not None and trace.pid is not None and trace.pid != pid:
        raise KernelTraceError(f"the kernel trace {path} is of PID {trace.pid}, not of PID {pid}")
    return trace


class _Bounded(io.RawIOBase):
    """At most ``limit`` bytes of ``raw``: a file that grows while it is read is read no further."""

    def __init__(self, raw: BinaryIO, limit: int) -> None:
        self._raw, self._left = raw, limit

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        size = self._left if size < 0 else min(size, self._left)
        data = self._raw.read(size) if size > 0 else b""
        self._left -= len(data)
        return data


def parse_trace(data: bytes | BinaryIO, *, source: str, redactor: ProcessRedactor | None = None) -> KernelTrace:
    """torch.profiler's events of a Chrome trace (torch's own export, or `record --kernels`' output), read as a
    stream; names redacted by ``redactor`` (default: the rules alone), then cut."""
    redact = (redactor or ProcessRedactor()).text

    def text(value: str) -> str:
        return redact(value[:RAW_NAME_CHARS])[:MAX_NAME_CHARS]

    stream: BinaryIO = io.BytesIO(data) if isinstance(data, bytes | bytearray) else data
    kept = _Kept()
    other: Mapping[str, Any] = {}
    base: Any = None
    events = False
    try:
        for key, value in iter_document(stream, array_key="traceEvents", max_value_chars=MAX_VALUE_CHARS,
                                        max_item_chars=MAX_EVENT_CHARS):
            if key == "traceEvents":
                if value is ARRAY_START:
                    events = True
                elif events:
                    kept.event(value, text)
            elif key == "otherData":
                other = _mapping(value)
            elif key == "baseTimeNanoseconds":
                base = value
    except JsonStreamError as exc:
        if exc.over_bound:
            raise KernelTraceError(f"{source} holds {exc}: not a trace of torch.profiler's (not read further)") from None
        raise KernelTraceError(f"{source} is not JSON ({exc}): not a Chrome trace of torch.profiler") from None
    if not events:
        raise KernelTraceError(f"{source} has no traceEvents: not a Chrome trace")
    if not kept.spans:
        raise KernelTraceError(f"{source} holds no torch.profiler events (no kernels, CUDA calls or CPU ops)")
    spans = kept.earliest()
    pid = _int(other.get("pid"))
    if pid is None and kept.pids:
        pid = max(kept.pids, key=kept.pids.__getitem__)
    started = _number(other.get("started_wall_s"), MAX_ABS_US)
    base_ns = _int(base) if _int(base) is not None and 0 <= base <= MAX_ABS_US * 1e3 else None
    if started is None and base_ns is not None and spans:
        started = (base_ns / 1e9) + spans[0].start_us / 1e6
    return KernelTrace(pid=pid, spans=spans, thread_names=kept.names, steps=tuple(sorted(kept.steps, key=lambda m: m.at_us)),
                       spans_left_out=kept.left_out, source=source, started_wall_s=started, base_wall_ns=base_ns)


class _Kept:
    """What a trace's events leave: the earliest ``MAX_SPANS`` spans (compacted as they come: memory stays within
    twice that), thread names, step marks, the pids of host spans (to tell whose trace it is)."""

    def __init__(self) -> None:
        self.spans: list[TraceSpan] = []
        self.names: dict[int, str] = {}
        self.steps: list[StepMark] = []
        self.pids: dict[int, int] = {}
        self.left_out = 0
        self.skipped = 0

    def event(self, e: Any, text: Callable[[str], str]) -> None:
        if not isinstance(e, dict):
            self.skipped += 1
            return
        ph, cat = e.get("ph"), e.get("cat")
        if ph == "M":
            _thread_name(e, self.names, text)
        elif ph == "X" and isinstance(cat, str) and cat in TRACE_CATS:
            span = _span(e, cat, text)
            if span is None:
                self.skipped += 1
                return
            pid = _int(e.get("pid"))
            if span.cat not in GPU_CATS and pid is not None and (pid in self.pids or len(self.pids) < MAX_PIDS_COUNTED):
                self.pids[pid] = self.pids.get(pid, 0) + 1
            if span.name.startswith(PROFILER_STEP_PREFIX) and len(self.steps) < MAX_STEPS:
                self.steps.append(StepMark(span.end_us, span.tid))
            self.spans.append(span)
            if len(self.spans) >= 2 * MAX_SPANS:
                self._compact()
        elif ph == "i" and cat == "step" and len(self.steps) < MAX_STEPS:
            ts = _number(e.get("ts"), MAX_ABS_US)
            if ts is not None:
                self.steps.append(StepMark(ts, _int(e.get("tid"))))

    def _compact(self) -> None:
        self.spans.sort(key=lambda s: (s.start_us, -s.dur_us))
        self.left_out += len(self.spans) - MAX_SPANS
        del self.spans[MAX_SPANS:]

    def earliest(self) -> tuple[TraceSpan, ...]:
        self.spans.sort(key=lambda s: (s.start_us, -s.dur_us))
        if len(self.spans) > MAX_SPANS:
            self._compact()
        return tuple(self.spans)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _number(value: Any, bound: float) -> float | None:
    """A finite number within ``bound`` of zero, as a float; None for anything else (a 401-digit integer, 1e308,
    a string, a boolean)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, int):
        return float(value) if -bound <= value <= bound else None
    return value if math.isfinite(value) and -bound <= value <= bound else None


def _int(value: Any) -> int | None:
    """An integer that fits in 64 bits (an id, a pid, a thread), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and -MAX_ID <= value <= MAX_ID else None


def _thread_name(e: Mapping[str, Any], names: dict[int, str], text: Callable[[str], str]) -> None:
    name = _mapping(e.get("args")).get("name")
    tid = _int(e.get("tid"))
    if e.get("name") == "thread_name" and tid is not None and isinstance(name, str) and (
            tid in names or len(names) < MAX_THREAD_NAMES):
        names.setdefault(tid, text(name))


def _span(e: Mapping[str, Any], cat: str, text: Callable[[str], str]) -> TraceSpan | None:
    """One of torch's complete events (its hot path: hundreds of thousands of them in a recording)."""
    ts, dur, name = _number(e.get("ts"), MAX_ABS_US), _number(e.get("dur"), MAX_DUR_US), e.get("name")
    if ts is None or dur is None or dur < 0 or not isinstance(name, str):
        return None
    args = _mapping(e.get("args"))
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
    return TraceSpan(cat=cat, name=text(name), start_us=ts, dur_us=dur, tid=tid, device=device,
                     correlation=corr, args=tuple(kept[:MAX_ARGS]))


def _arg(value: Any, text: Callable[[str], str]) -> str | int | float | bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if _int(value) is not None else None
    if isinstance(value, float):
        return value if math.isfinite(value) and abs(value) <= MAX_ABS_US else None
    if isinstance(value, str):
        return text(value)
    if isinstance(value, list) and len(value) <= 4 and all(_int(v) is not None for v in value):
        return "x".join(str(v) for v in value)  # a launch's grid or block: [x, y, z]
    return None


# --- a recording `record --kernels` brought back ---------------------------------------------------------------


def recorded_trace(data: bytes | BinaryIO, outcome: Mapping[str, Any], pid: int,
                   wall_minus_mono_s: float | None = None) -> tuple[KernelTrace, ClockMap]:
    """torch's trace of a recording, with the outcome's thread names and step marks, and its clock map
    (``wall_minus_mono_s``: this machine's wall - monotonic clock, for a trace without clock marks)."""
    redactor = redactor_for(pid)
    trace = parse_trace(data, source="record --kernels", redactor=redactor)
    clock = clock_map(trace, outcome.get("clock_marks"), wall_minus_mono_s)
    names = dict(trace.thread_names)
    threads = outcome.get("threads")
    if isinstance(threads, dict):
        for key, name in list(threads.items())[:MAX_THREAD_NAMES]:
            if isinstance(key, str) and key.isdigit() and len(key) <= 20 and isinstance(name, str):
                names[int(key)] = redactor.text(name[:RAW_NAME_CHARS])[:MAX_NAME_CHARS]
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

