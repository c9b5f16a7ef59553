"""One Perfetto trace of a `record --kernels` window: torch.profiler's events (CUDA kernels, copies, the CUDA calls
that launched them, CPU ops) and our sampled thread states, probe counters and findings on one timeline. Pure.

Layout (docs/integrations.md):

- each thread of the process keeps its native id as its track: torch's ops and CUDA calls of that thread on it,
  named as our sampled track is (``drafter-0 [drafter]``); our sampled states and frames go to a track of their
  own just below it (``drafter-0 [drafter] · sampled``): both are exact for the same thread, but a run of samples
  in one state does not nest with the ops it spans, and slices on one track must nest;
- each CUDA stream of the process is a track of the same process (``cuda:0 stream 7``), on top, with its kernels,
  copies and sets; a flow arrow joins each one to the call that launched it (CUPTI's correlation id);
- optimizer steps as instants on the thread that stepped; the counters and findings as in every trace.

Timestamps: torch's are placed on our monotonic clock through the recording's ``ClockMap`` (``sources.kernel_trace``),
then on the trace's time base, widened to start at the first of our samples and torch's events. Bounded: at most
``max_events`` events; past it, torch's latest events are left out and the trace says where it was cut.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from dflash_diag.export.timebase import Timebase, timebase
from dflash_diag.export.trace import chrome_trace
from dflash_diag.model import Finding, Observation, ThreadStats
from dflash_diag.model.kernels import GPU_CATS, LAUNCH_CATS, ClockMap, KernelTrace, TraceSpan

DEFAULT_MAX_EVENTS = 1_000_000
# Synthetic track ids: above every native thread id (Linux's pid_max is at most 2^22).
GPU_TID_BASE = 1 << 22
SAMPLED_TID_BASE = 1 << 23
MAX_GPU_TRACKS = 256
GPU_SORT_BASE = 0
THREAD_SORT_BASE = 1000
SAMPLED_CATS = ("state", "frame")


@dataclass(frozen=True, slots=True)
class Merged:
    doc: dict[str, Any]
    torch_events: int  # torch.profiler's events written (spans, flows, step marks)
    left_out: int  # torch's spans left out past --max-events
    cut_at_s: float | None  # where the trace was cut, in seconds from its start (None: not cut)


def kernels_trace(obs: Observation, threads: tuple[ThreadStats, ...], findings: tuple[Finding, ...],
                  trace: KernelTrace, clock: ClockMap, *, tool_version: str, recording: Mapping[str, Any],
                  max_events: int = DEFAULT_MAX_EVENTS) -> Merged:
    """The merged Trace Event Format document (see the module docstring)."""
    tb = _widened(timebase(obs), trace, clock)
    base = chrome_trace(obs, threads, findings, tool_version=tool_version, tb=tb)
    pid = obs.pid
    meta = [e for e in base["traceEvents"] if e["ph"] == "M"]
    ours = [_to_sampled_track(e) for e in base["traceEvents"] if e["ph"] != "M"]
    budget = max(0, max_events - len(ours) - len(meta))
    events, left_out, cut_us = _torch_events(pid, trace, clock, tb, budget)
    if cut_us is not None:
        events.append({"name": "trace cut here (--max-events)", "cat": "note", "ph": "i", "s": "g", "pid": pid,
                       "tid": 0, "ts": cut_us, "args": {"left_out": left_out}})
    labels = _labels(meta)
    body = ours + events
    tracks = {(e["pid"], e["tid"]) for e in body}
    metadata = [e for e in meta if e["name"] in ("process_name", "process_labels")]
    metadata += _thread_metadata(pid, tracks, labels, meta, trace)
    doc = dict(base)
    doc["traceEvents"] = metadata + _ordered(body)
    other = dict(base["otherData"])
    other["kernels"] = {
        **{k: v for k, v in recording.items() if isinstance(v, str | int | float | bool) or v is None},
        "torch_events": len(events), "left_out": left_out,
        "cut_at_s": None if cut_us is None else round(cut_us / 1e6, 6),
        "clock": {"method": clock.method, "marks": clock.marks,
                  "uncertainty_us": None if clock.uncertainty_us is None else round(clock.uncertainty_us, 3),
                  "drift_us_per_s": round(clock.drift * 1e6, 3)},
    }
    doc["otherData"] = other
    return Merged(doc=doc, torch_events=len(events), left_out=left_out,
                  cut_at_s=None if cut_us is None else cut_us / 1e6)


def _widened(tb: Timebase, trace: KernelTrace, clock: ClockMap) -> Timebase:
    if not trace.spans:
        return tb
    w0, w1 = trace.window_us
    start, end = clock.mono_us(w0) / 1e6, clock.mono_us(w1) / 1e6
    return Timebase(origin_mono_s=min(tb.origin_mono_s, start), wall_minus_mono_s=tb.wall_minus_mono_s,
                    end_mono_s=max(tb.end_mono_s, end))


def _to_sampled_track(e: dict[str, Any]) -> dict[str, Any]:
    if e.get("cat") in SAMPLED_CATS and e.get("ph") == "X" and 0 < e["tid"] < GPU_TID_BASE:
        return {**e, "tid": SAMPLED_TID_BASE + e["tid"]}
    return e


def _labels(meta: Iterable[dict[str, Any]]) -> dict[int, str]:
    return {e["tid"]: e["args"]["name"] for e in meta if e["name"] == "thread_name"}


def _sort_indexes(meta: Iterable[dict[str, Any]]) -> dict[int, int]:
    return {e["tid"]: e["args"]["sort_index"] for e in meta if e["name"] == "thread_sort_index"}


def _torch_events(pid: int, trace: KernelTrace, clock: ClockMap, tb: Timebase,
                  budget: int) -> tuple[list[dict[str, Any]], int, float | None]:
    """torch's spans as events in time order until ``budget`` runs out; (events, spans left out, cut µs)."""
    origin_us = tb.origin_mono_s * 1e6

    def at(t_us: float) -> float:
        return round(clock.mono_us(t_us) - origin_us, 3)

    gpu_tracks: dict[tuple[int, int], int] = {}
    launches = {s.correlation: s for s in trace.spans if s.cat in LAUNCH_CATS and s.correlation is not None}
    events: list[dict[str, Any]] = []
    kept_launches: set[int] = set()
    cut_us: float | None = None
    left_out = 0
    for i, span in enumerate(trace.spans):  # in start order
        linked = span.cat in GPU_CATS and span.correlation in kept_launches
        cost = 3 if linked else 1
        if len(events) + cost > budget:
            cut_us = at(span.start_us)
            left_out = len(trace.spans) - i
            break
        if span.cat in GPU_CATS:
            key = (span.device if span.device is not None else -1, span.tid)
            if key not in gpu_tracks and len(gpu_tracks) >= MAX_GPU_TRACKS:
                continue
            tid = gpu_tracks.setdefault(key, GPU_TID_BASE + len(gpu_tracks))
        else:
            tid = span.tid
        events.append(_span_event(pid, tid, span, at))
        if span.cat in LAUNCH_CATS and span.correlation is not None:
            kept_launches.add(span.correlation)
        if linked:
            launch = launches[span.correlation]  # type: ignore[index]
            flow = {"cat": "launch", "name": "launch", "pid": pid, "id": span.correlation}
            events.append({**flow, "ph": "s", "tid": launch.tid, "ts": at(launch.start_us)})
            events.append({**flow, "ph": "f", "bp": "e", "tid": tid, "ts": at(span.start_us)})
    last_us = at(trace.spans[-1].start_us) if trace.spans else 0.0
    for mark in trace.steps:
        ts = at(mark.at_us)
        if (cut_us is None or ts < cut_us) and ts <= last_us + 1e6 and len(events) < budget:
            events.append({"name": "optimizer step", "cat": "step", "ph": "i", "s": "t" if mark.tid else "p",
                           "pid": pid, "tid": mark.tid or 0, "ts": ts, "args": {}})
    for (device, stream), tid in gpu_tracks.items():
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                       "args": {"name": f"cuda:{device} stream {stream}"}})
    return events, left_out, cut_us


def _span_event(pid: int, tid: int, span: TraceSpan, at: Any) -> dict[str, Any]:
    start = at(span.start_us)
    end = at(span.end_us)
    args: dict[str, Any] = dict(span.args)
    if span.correlation is not None:
        args["correlation"] = span.correlation
    if span.cat in GPU_CATS:  # on a track of its own: the device and stream say where it ran (doctor reads them back)
        args["device"], args["stream"] = span.device, span.tid
    return {"name": span.name, "cat": span.cat, "ph": "X", "pid": pid, "tid": tid, "ts": start,
            "dur": max(0.0, round(end - start, 3)), "args": args}


def _thread_metadata(pid: int, tracks: set[tuple[int, int]], labels: Mapping[int, str],
                     meta: Iterable[dict[str, Any]], trace: KernelTrace) -> list[dict[str, Any]]:
    """A name and a place for every track that carries events: GPU streams first, then each thread with its
    sampled track just below it."""
    order = _sort_indexes(meta)
    out: list[dict[str, Any]] = []
    for _, tid in sorted(tracks):
        if tid == 0:
            continue
        if tid >= SAMPLED_TID_BASE:
            native = tid - SAMPLED_TID_BASE
            name = f"{labels.get(native) or trace.thread_names.get(native) or f'thread {native}'} · sampled"
            index = THREAD_SORT_BASE + 2 * order.get(native, 500) + 1
        elif tid >= GPU_TID_BASE:
            continue  # named with its events (cuda:D stream S)
        else:
            name = labels.get(tid) or trace.thread_names.get(tid) or f"thread {tid}"
            index = THREAD_SORT_BASE + 2 * order.get(tid, 500)
        out.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}})
        out.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": index}})
    return out


def _ordered(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Metadata first, then time order (a parent before its children); complete events on one track nested."""
    meta = [e for e in events if e["ph"] == "M"]
    meta += [{"name": "thread_sort_index", "ph": "M", "pid": e["pid"], "tid": e["tid"],
              "args": {"sort_index": GPU_SORT_BASE + e["tid"] - GPU_TID_BASE}}
             for e in list(meta) if e["name"] == "thread_name" and e["tid"] >= GPU_TID_BASE]
    rest = sorted((e for e in events if e["ph"] != "M"), key=lambda e: (e["ts"], -e.get("dur", 0)))
    open_until: dict[tuple[int, int], list[float]] = {}
    for e in rest:
        if e["ph"] != "X":
            continue
        stack = open_until.setdefault((e["pid"], e["tid"]), [])
        while stack and stack[-1] <= e["ts"]:
            stack.pop()
        end = e["ts"] + e["dur"]
        if stack and end > stack[-1]:  # rounding made a child end after its parent: it ends with it
            dur = max(0.0, stack[-1] - e["ts"])
            while dur > 0.0 and e["ts"] + dur > stack[-1]:  # as a reader adds them up, in floating point
                dur = math.nextafter(dur, 0.0)
            e["dur"] = dur
            end = e["ts"] + dur
        stack.append(end)
    return meta + rest
