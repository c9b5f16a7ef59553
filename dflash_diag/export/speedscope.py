"""A sampling window's stacks as a speedscope file (https://www.speedscope.app/file-format-schema.json). Pure.

One ``sampled`` profile per Python thread, in seconds: each sample is that thread's stack (outermost frame
first, as speedscope wants; py-spy reports innermost first) weighted by how long it stood, i.e. until the
next stack sample of the process. Frames are shared between profiles. Threads are ordered targets,
drafters, others, and named with their pipeline stage.
"""

from __future__ import annotations

from typing import Any

from dflash_diag.analysis.threads import classify_stacks, cuda_loaded
from dflash_diag.export.timebase import sample_ends
from dflash_diag.model import PIPELINE_STAGES, Frame, Observation, ThreadStats
from dflash_diag.model.stats import stage_names

SPEEDSCOPE_SCHEMA = "https://www.speedscope.app/file-format-schema.json"


def speedscope(obs: Observation, threads: tuple[ThreadStats, ...], *, tool_version: str) -> dict[str, Any]:
    frames: list[dict[str, Any]] = []
    index: dict[tuple[str, str, int, bool], int] = {}

    def frame_id(frame: Frame) -> int:
        key = (frame.name, frame.filename, frame.line, frame.native)
        if key not in index:
            entry: dict[str, Any] = {"name": frame.name if not frame.native else f"{frame.name} [native]"}
            if frame.filename:
                entry["file"] = frame.filename
            if frame.line:
                entry["line"] = frame.line
            index[key] = len(frames)
            frames.append(entry)
        return index[key]

    grouped = classify_stacks(obs.stacks, obs.line_text, cuda=cuda_loaded(obs))
    ends = sample_ends(obs)
    order = {t.os_thread_id: i for i, t in enumerate(threads) if t.os_thread_id is not None}
    words = stage_names(threads)  # the program's words for its stages (the roles unless its threads use ours)
    stats = {t.os_thread_id: t for t in threads if t.os_thread_id is not None}
    origin = min(ends) if ends else 0.0
    profiles: list[dict[str, Any]] = []
    for ident, rows in sorted(grouped.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])):
        samples: list[list[int]] = []
        weights: list[float] = []
        for row in rows:
            if not row.thread.frames:
                continue
            samples.append([frame_id(f) for f in reversed(row.thread.frames)])
            weights.append(round(max(0.0, ends.get(row.monotonic_s, row.monotonic_s) - row.monotonic_s), 6))
        if not samples:
            continue
        t = stats.get(ident)
        name = t.name if t is not None else next((r.thread.name for r in rows if r.thread.name), f"thread-{ident}")
        stage = f" [{words.word(t.stage)}]" if t is not None and t.stage in PIPELINE_STAGES else ""
        start = round(rows[0].monotonic_s - origin, 6)
        profiles.append({
            "type": "sampled",
            "name": f"{name}{stage} (TID {ident})",
            "unit": "seconds",
            "startValue": start,
            "endValue": round(start + sum(weights), 6),
            "samples": samples,
            "weights": weights,
        })
    return {
        "$schema": SPEEDSCOPE_SCHEMA,
        "shared": {"frames": frames},
        "profiles": profiles,
        "name": f"PID {obs.pid}: {' '.join(obs.cmdline)[:120]}",
        "activeProfileIndex": 0,
        "exporter": f"dflash-diag {tool_version}",
    }
