"""A job's timeline (docs/jobs.md): every rank's trace in one file, one process track per rank on one clock, and the
job's findings as instants; and every rank's sampled stacks in one speedscope file, one profile per thread. Pure.

The ranks were sampled by one command on one machine, so their monotonic clocks are the same clock: each rank's
events are shifted from its own origin to the job's earliest one.
"""

from __future__ import annotations

from typing import Any

from dflash_diag.export.speedscope import speedscope
from dflash_diag.export.timebase import timebase
from dflash_diag.export.trace import GENERATOR, TRACE_SCHEMA, chrome_trace
from dflash_diag.model.job import JobAnalysis
from dflash_diag.view.job import job_json


def job_trace(analysis: JobAnalysis, *, tool_version: str) -> dict[str, Any]:
    job = analysis.observation
    sampled = [(ident, obs, a) for ident, obs, a in zip(job.topology.ranks, job.ranks, analysis.ranks, strict=True)
               if obs.stacks]
    origins = [timebase(obs).origin_mono_s for _, obs, _ in sampled]
    start = min(origins, default=0.0)
    events: list[dict[str, Any]] = []
    for (ident, obs, a), origin in zip(sampled, origins, strict=True):
        doc = chrome_trace(obs, a.threads, (), tool_version=tool_version)
        shift_us = round((origin - start) * 1e6)
        for event in doc["traceEvents"]:
            if event.get("ph") == "M" and event.get("name") == "process_name":
                event = {**event, "args": {"name": f"{ident.label} (PID {ident.pid}): "
                                                   f"{' '.join(obs.cmdline)[:100] or 'python'}"}}
            elif event.get("ph") == "M" and event.get("name") == "process_sort_index":
                continue
            elif "ts" in event:
                event = {**event, "ts": event["ts"] + shift_us}
            events.append(event)
        events.append({"name": "process_sort_index", "ph": "M", "pid": obs.pid, "tid": 0,
                       "args": {"sort_index": ident.rank if ident.rank is not None else 10_000}})
    anchor = sampled[0][1].pid if sampled else 0
    for f in analysis.findings:
        if f.rule_id in ("no-probes",):
            continue
        events.append({"name": f"{f.rule_id}: {f.claim}"[:200], "cat": "finding", "ph": "i", "s": "g", "pid": anchor,
                       "tid": 0, "ts": 0, "args": {"severity": f.severity.label, "remedy": f.remedy[:500]}})
    topo = job.topology
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "generator": GENERATOR, "schema": TRACE_SCHEMA, "version": tool_version,
            "pid": topo.launcher_pid or topo.asked_pid, "window_s": round(job.window_s, 3),
            "stack_samples": sum(len(o.stacks) for o in job.ranks),
            "job": {k: v for k, v in job_json(analysis).items() if k != "ranks"},
            "headline": analysis.headline.text if analysis.headline is not None else None,
        },
    }


def job_speedscope(analysis: JobAnalysis, *, tool_version: str) -> dict[str, Any]:
    job = analysis.observation
    frames: list[dict[str, Any]] = []
    index: dict[tuple[Any, ...], int] = {}
    profiles: list[dict[str, Any]] = []
    for ident, obs, a in zip(job.topology.ranks, job.ranks, analysis.ranks, strict=True):
        doc = speedscope(obs, a.threads, tool_version=tool_version)
        local = doc["shared"]["frames"]
        remap = []
        for entry in local:
            key = (entry.get("name"), entry.get("file"), entry.get("line"))
            if key not in index:
                index[key] = len(frames)
                frames.append(entry)
            remap.append(index[key])
        for profile in doc["profiles"]:
            profiles.append({**profile, "name": f"{ident.label}: {profile['name']}",
                             "samples": [[remap[i] for i in sample] for sample in profile["samples"]]})
    topo = job.topology
    return {
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "shared": {"frames": frames},
        "profiles": profiles,
        "name": f"job of PID {topo.launcher_pid or topo.asked_pid}: {len(topo.ranks)} ranks",
        "activeProfileIndex": 0,
        "exporter": f"dflash-diag {tool_version}",
    }


__all__ = ["job_speedscope", "job_trace"]
