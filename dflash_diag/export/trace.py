"""A sampling window as a Chrome Trace Event Format document, for Perfetto UI and ``chrome://tracing``. Pure.

Layout (docs/integrations.md):

- one track per Python thread (``tid`` = the kernel TID), named by ``thread_name`` metadata and ordered
  targets, drafters, others; on it, one slice per run of samples in the same state (``cat: "state"``:
  python, native, GPU wait, GIL wait, queue put/get, compile, checkpoint recompute, idle), and nested inside
  it one slice per run of the same innermost frame (``cat: "frame"``, named ``function (file.py:line)``);
  a sample lasts until the next stack sample of the process;
- counter tracks on the process: every watched queue's depth, tok/s (when the program publishes it),
  steps/s (from ``session.step()``), and per-GPU utilisation (NVML);
- instant events: recompiles, graph breaks and recompile-limit hits (with the thread that compiled),
  CUDA-graph captures and skips (when their counts rose between two boards), and the findings (global,
  at the end of the window).

Only complete (``X``), counter (``C``), instant (``i``) and metadata (``M``) events are written, in the
JSON object form with ``displayTimeUnit`` and ``otherData`` (who wrote it, for what process).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from dflash_contract.board import (
    AppKeys,
    CompileKeys,
    CudagraphsKeys,
    PayloadKeys,
    ProbeName,
    QueueKeys,
    SessionKeys,
)
from dflash_diag.analysis.threads import ClassifiedThread, classify_stacks, cuda_loaded
from dflash_diag.export.timebase import Timebase, sample_ends, timebase
from dflash_diag.model import PIPELINE_STAGES, Board, Finding, Frame, Observation, ThreadState, ThreadStats
from dflash_diag.model.stats import stage_names
from dflash_diag.view.findings import finding_json

GENERATOR = "dflash-diag"
# 2: a finding's args are the one finding document (docs/findings.md); 1 had flat "evidence: NAME" keys.
TRACE_SCHEMA = "dflash-diag.trace/2"
# Chrome's reserved colour names (trace-viewer's color scheme), so states look alike in every trace.
STATE_COLOURS: dict[ThreadState, str] = {
    ThreadState.PYTHON: "thread_state_running",
    ThreadState.NATIVE: "good",
    ThreadState.GPU_WAIT: "thread_state_iowait",
    ThreadState.GIL_WAIT: "terrible",
    ThreadState.QUEUE_PUT: "yellow",
    ThreadState.QUEUE_GET: "olive",
    ThreadState.COMPILE: "rail_load",
    ThreadState.CHECKPOINT: "rail_animation",
    ThreadState.IDLE: "thread_state_sleeping",
}
MAX_EVENT_ARG_CHARS = 500


@dataclass(frozen=True, slots=True)
class _Span:
    state: ThreadState
    rule: str
    frame: Frame | None
    start_s: float
    end_s: float
    samples: int = 1


def frame_label(frame: Frame | None) -> str:
    if frame is None:
        return "(no frame)"
    if frame.native or not frame.line:
        return frame.name
    return f"{frame.name} ({frame.short_filename}:{frame.line})"


def chrome_trace(
    obs: Observation,
    threads: tuple[ThreadStats, ...],
    findings: tuple[Finding, ...],
    *,
    tool_version: str,
    tb: Timebase | None = None,
) -> dict[str, Any]:
    """The Trace Event Format document of one observation window (see the module docstring); ``tb``: the time
    base to use (default: the window's own; ``record --kernels`` widens it to hold the profiler's events)."""
    tb = tb or timebase(obs)
    pid = obs.pid
    events: list[dict[str, Any]] = [
        _meta(pid, 0, "process_name", name=f"PID {pid}: {' '.join(obs.cmdline)[:120] or 'python'}"),
        _meta(pid, 0, "process_labels", labels="dflash-diag"),
    ]
    events += _thread_events(obs, threads, tb)
    boards = _distinct_boards(obs)
    events += _board_counters(pid, boards, tb)
    events += _gpu_counters(pid, obs, tb)
    events += _compile_instants(pid, boards, tb)
    events += _cudagraph_instants(pid, boards, tb)
    events += _finding_instants(pid, findings, tb)
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "generator": GENERATOR,
            "schema": TRACE_SCHEMA,
            "version": tool_version,
            "pid": pid,
            "cmdline": " ".join(obs.cmdline)[:1000],
            "window_s": round(obs.window_s, 3),
            "stack_samples": len(obs.stacks),
            "started_wall_s": round(tb.origin_mono_s + tb.wall_minus_mono_s, 3),
            "warnings": list(obs.warnings)[:20],
        },
    }


# --- threads -----------------------------------------------------------------------------------------------


def _meta(pid: int, tid: int, kind: str, **args: Any) -> dict[str, Any]:
    return {"name": kind, "ph": "M", "pid": pid, "tid": tid, "args": args}


def _spans(rows: list[ClassifiedThread], ends: Mapping[float, float]) -> list[_Span]:
    """Consecutive samples of one thread as spans of (state, innermost frame), merged when contiguous."""
    out: list[_Span] = []
    for row in rows:
        end = ends.get(row.monotonic_s, row.monotonic_s)
        frame = row.thread.frames[0] if row.thread.frames else None
        last = out[-1] if out else None
        if last is not None and last.end_s == row.monotonic_s and last.state == row.state and last.frame == frame:
            out[-1] = _Span(last.state, last.rule, last.frame, last.start_s, end, last.samples + 1)
        else:
            out.append(_Span(row.state, row.rule, frame, row.monotonic_s, end))
    return out


def _state_slices(spans: list[_Span]) -> Iterator[tuple[_Span, list[_Span]]]:
    """Runs of contiguous spans in the same state, with the frame spans they hold."""
    run: list[_Span] = []
    for span in spans:
        if run and (run[-1].state != span.state or run[-1].end_s != span.start_s):
            yield run[0], run
            run = []
        run.append(span)
    if run:
        yield run[0], run


def _thread_events(obs: Observation, threads: tuple[ThreadStats, ...], tb: Timebase) -> list[dict[str, Any]]:
    pid = obs.pid
    grouped = classify_stacks(obs.stacks, obs.line_text, cuda=cuda_loaded(obs))
    ends = sample_ends(obs)
    order = {t.os_thread_id: i for i, t in enumerate(threads) if t.os_thread_id is not None}
    names = {t.os_thread_id: t for t in threads if t.os_thread_id is not None}
    words = stage_names(threads)  # the program's words for its stages (the roles unless its threads use ours)
    events: list[dict[str, Any]] = []
    for ident, rows in sorted(grouped.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])):
        stats = names.get(ident)
        name = stats.name if stats is not None else next((r.thread.name for r in reversed(rows) if r.thread.name),
                                                          f"thread-{ident}")
        label = f"{name} [{words.word(stats.stage)}]" if stats is not None and stats.stage in PIPELINE_STAGES else name
        events.append(_meta(pid, ident, "thread_name", name=label))
        events.append(_meta(pid, ident, "thread_sort_index", sort_index=order.get(ident, len(order) + 1)))
        for first, run in _state_slices(_spans(rows, ends)):
            start, end = tb.us(first.start_s), tb.us(run[-1].end_s)
            events.append({
                "name": first.state.label, "cat": "state", "ph": "X", "pid": pid, "tid": ident,
                "ts": start, "dur": max(0, end - start), "cname": STATE_COLOURS[first.state],
                "args": {"state": first.state.value, "rule": first.rule, "samples": sum(s.samples for s in run)},
            })
            for span in run:
                s0, s1 = tb.us(span.start_s), tb.us(span.end_s)
                args: dict[str, Any] = {"state": span.state.value, "samples": span.samples}
                if span.frame is not None:
                    args.update(file=span.frame.filename, line=span.frame.line, native=span.frame.native)
                events.append({
                    "name": frame_label(span.frame), "cat": "frame", "ph": "X", "pid": pid, "tid": ident,
                    "ts": s0, "dur": max(0, s1 - s0), "args": args,
                })
    return events


# --- counters from the boards and NVML ----------------------------------------------------------------------


def _distinct_boards(obs: Observation) -> list[Board]:
    boards = obs.boards if isinstance(obs.boards, tuple) else ()
    seen: dict[tuple[int, int], Board] = {}
    for b in boards:
        seen[(b.writer.start_time_ticks, b.seq)] = b
    return sorted(seen.values(), key=lambda b: (b.wall_time_s, b.seq))


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if value == value and abs(value) != float("inf") else None


def _counter(pid: int, name: str, ts: int, **values: float) -> dict[str, Any]:
    return {"name": name, "ph": "C", "pid": pid, "tid": 0, "ts": max(0, ts), "args": values}


def _board_counters(pid: int, boards: list[Board], tb: Timebase) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    previous: Board | None = None
    for board in boards:
        ts = tb.wall_us(board.wall_time_s)
        queues = board.probe(ProbeName.QUEUES) or {}
        for qname, payload in sorted(queues.items()):
            depth = _number(payload.get(QueueKeys.DEPTH)) if isinstance(payload, Mapping) else None
            if depth is not None:
                events.append(_counter(pid, f"{qname} depth", ts, items=depth))
        tokens = _number(board.app.get(AppKeys.TOKENS_PER_S)) if isinstance(board.app, Mapping) else None
        if tokens is not None:
            events.append(_counter(pid, "tok/s", ts, **{"tok/s": tokens}))
        rate = _steps_per_s(previous, board)
        if rate is not None:
            events.append(_counter(pid, "steps/s", ts, **{"steps/s": rate}))
        previous = board
    return events


def _steps_per_s(before: Board | None, after: Board) -> float | None:
    if before is None:
        return None
    a, b = _number(before.session.get(SessionKeys.STEPS)), _number(after.session.get(SessionKeys.STEPS))
    dt = after.wall_time_s - before.wall_time_s
    if a is None or b is None or dt <= 0 or b < a:
        return None
    return round((b - a) / dt, 3)


def _gpu_counters(pid: int, obs: Observation, tb: Timebase) -> list[dict[str, Any]]:
    if not isinstance(obs.gpus, tuple):
        return []
    events: list[dict[str, Any]] = []
    for sweep in obs.gpus:
        for gpu in sweep:
            util = _number(gpu.util_pct)
            if util is not None:
                events.append(_counter(pid, f"GPU {gpu.index} utilisation", tb.us(gpu.monotonic_s), **{"util %": util}))
            mem = _number(gpu.memory_used_bytes)
            if mem is not None:
                events.append(_counter(pid, f"GPU {gpu.index} memory", tb.us(gpu.monotonic_s), GiB=round(mem / 2**30, 3)))
    return events


# --- instants -----------------------------------------------------------------------------------------------


def _short(value: Any) -> Any:
    return value[:MAX_EVENT_ARG_CHARS] if isinstance(value, str) else value


def _instant(pid: int, name: str, ts: int, tid: int | None, args: Mapping[str, Any], cat: str) -> dict[str, Any]:
    event = {"name": name[:200], "cat": cat, "ph": "i", "pid": pid, "tid": tid if tid is not None else 0,
             "ts": ts, "s": "t" if tid is not None else "p", "args": {k: _short(v) for k, v in args.items()}}
    return event


def _tids_by_name(board: Board) -> dict[str, int]:
    return {name: tid for tid, name in board.threads.items()}


def _compile_instants(pid: int, boards: list[Board], tb: Timebase) -> list[dict[str, Any]]:
    seen: set[tuple[Any, ...]] = set()
    events: list[dict[str, Any]] = []
    for board in boards:
        payload = board.probe(ProbeName.COMPILE)
        if payload is None:
            continue
        tids = _tids_by_name(board)
        for key, kind in ((CompileKeys.RECENT_RECOMPILES, "recompile"), (CompileKeys.RECENT_GRAPH_BREAKS, "graph break"),
                          (CompileKeys.LIMIT_HITS, "recompile limit hit")):
            entries = payload.get(key)
            for entry in entries if isinstance(entries, list) else ():
                if not isinstance(entry, Mapping):
                    continue
                wall = _number(entry.get(CompileKeys.WALL_TIME_S))
                what = entry.get(CompileKeys.FUNCTION) or entry.get(CompileKeys.SITE) or "?"
                ident = (kind, wall, what, entry.get(PayloadKeys.REASON))
                if wall is None or ident in seen:
                    continue
                seen.add(ident)
                ts = tb.wall_us(wall)
                if ts < 0:
                    continue  # before the window
                thread = entry.get(CompileKeys.THREAD)
                events.append(_instant(pid, f"{kind}: {what}", ts, tids.get(thread) if isinstance(thread, str) else None,
                                       {k: v for k, v in entry.items() if isinstance(v, (str, int, float, bool))},
                                       "compile"))
    return events


def _cudagraph_instants(pid: int, boards: list[Board], tb: Timebase) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    previous: Mapping[str, Any] | None = None
    for board in boards:
        payload = board.probe(ProbeName.CUDAGRAPHS)
        if payload is None:
            continue
        if previous is not None:
            ts = tb.wall_us(board.wall_time_s)
            for key, name, extra in ((CudagraphsKeys.CAPTURES, "CUDA graph capture", CudagraphsKeys.CAPTURE_THREADS),
                                     (CudagraphsKeys.SKIPS, "CUDA graph skipped", CudagraphsKeys.SKIP_REASONS)):
                now, before = _number(payload.get(key)), _number(previous.get(key))
                if now is not None and before is not None and now > before:
                    detail = payload.get(extra)
                    events.append(_instant(pid, name, max(0, ts), None,
                                           {"new": now - before, "total": now,
                                            extra: ", ".join(map(str, detail[-3:])) if isinstance(detail, list) else ""},
                                           "cudagraphs"))
        previous = payload
    return events


def _finding_instants(pid: int, findings: tuple[Finding, ...], tb: Timebase) -> list[dict[str, Any]]:
    """Each finding's instant carries the finding's one document as its args (doctor's JSON, view/findings.py):
    evidence as {name, value} pairs, the causal links; Perfetto shows them as nested args."""
    events = []
    for f in findings:
        event = _instant(pid, f"{f.severity.label}: {f.rule_id}", tb.end_us, None, {}, "finding")
        event["args"] = dict(finding_json(f))  # whole, as in every other output (a claim is not cut at 500)
        event["s"] = "g"
        events.append(event)
    return events
