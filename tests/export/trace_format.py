"""Validators of the formats ``dflash-diag record`` writes, from the formats' own rules.

Trace Event Format (the JSON that Perfetto UI and chrome://tracing load; "Trace Event Format" document of the
Chromium project): the JSON object form with a ``traceEvents`` array; every event an object with a known
``ph``, integer ``pid``/``tid`` and a name; ``ts`` (µs) on every non-metadata event; ``X`` with a duration
>= 0; ``B``/``E`` balanced per thread; complete events on one thread nested (a slice inside another ends
before it) rather than overlapping; counters with numeric values only; instant scope g/p/t; metadata
events with the arguments their name requires; and (our rule, so every track is labelled) a
``thread_name`` for every thread that carries events; ``ts`` non-decreasing per track in file order.

speedscope: the file-format JSON schema shipped with speedscope (tests/fixtures/speedscope/), plus what the
schema cannot say: frame indices in range, one weight per sample, endValue >= startValue.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

PHASES = set("BEXiIbneCMsftPONDRcv(),") | {"I"}
METADATA_ARGS = {"process_name": ("name", str), "process_labels": ("labels", str), "process_sort_index": ("sort_index", int),
                 "thread_name": ("name", str), "thread_sort_index": ("sort_index", int)}
RESERVED_COLOURS = {
    "thread_state_uninterruptible", "thread_state_iowait", "thread_state_running", "thread_state_runnable",
    "thread_state_sleeping", "thread_state_unknown", "background_memory_dump", "light_memory_dump",
    "detailed_memory_dump", "vsync_highlight_color", "generic_work", "good", "bad", "terrible", "black", "grey",
    "white", "yellow", "olive", "rail_response", "rail_animation", "rail_idle", "rail_load", "startup",
    "heap_dump_stack_frame", "heap_dump_object_type", "heap_dump_child_node_highlight", "cq_build_running",
    "cq_build_passed", "cq_build_failed", "cq_build_abandoned", "cq_build_attempt_runnig", "cq_build_attempt_passed",
    "cq_build_attempt_failed",
}
SPEEDSCOPE_SCHEMA = Path(__file__).resolve().parents[1] / "fixtures" / "speedscope" / "file-format-schema.json"


def _is_num(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def strict_json(data: bytes | str) -> Any:
    """JSON as browsers parse it: NaN / Infinity are not JSON."""
    def reject(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")
    return json.loads(data, parse_constant=reject)


def validate_trace(doc: Any) -> list[str]:
    """Every rule the document breaks, as one line each (empty: valid)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        return ["not the JSON object form: no traceEvents array"]
    problems: list[str] = []
    if doc.get("displayTimeUnit", "ms") not in ("ms", "ns"):
        problems.append("displayTimeUnit must be ms or ns")
    if "otherData" in doc and not isinstance(doc["otherData"], dict):
        problems.append("otherData must be an object")
    named_threads: set[tuple[int, int]] = set()
    used_threads: set[tuple[int, int]] = set()
    open_b: dict[tuple[int, int], list[str]] = {}
    last_ts: dict[tuple[Any, ...], float] = {}
    complete: dict[tuple[int, int], list[tuple[float, float, int]]] = {}
    for i, e in enumerate(doc["traceEvents"]):
        where = f"event {i}"
        if not isinstance(e, dict):
            problems.append(f"{where}: not an object")
            continue
        ph = e.get("ph")
        if ph not in PHASES:
            problems.append(f"{where}: unknown ph {ph!r}")
            continue
        for key in ("pid", "tid"):
            if not isinstance(e.get(key), int) or isinstance(e.get(key), bool):
                problems.append(f"{where}: {key} must be an integer")
        if not isinstance(e.get("name"), str) and ph != "E":
            problems.append(f"{where}: no name")
        if "args" in e and not isinstance(e["args"], dict):
            problems.append(f"{where}: args must be an object")
        if "cname" in e and e["cname"] not in RESERVED_COLOURS:
            problems.append(f"{where}: cname {e['cname']!r} is not a reserved colour name")
        track = (e.get("pid"), e.get("tid"))
        if ph == "M":
            rule = METADATA_ARGS.get(e.get("name"))
            if rule is None:
                problems.append(f"{where}: unknown metadata event {e.get('name')!r}")
            elif not isinstance((e.get("args") or {}).get(rule[0]), rule[1]):
                problems.append(f"{where}: metadata {e['name']} needs args.{rule[0]}")
            if e.get("name") == "thread_name":
                named_threads.add(track)
            continue
        if not _is_num(e.get("ts")):
            problems.append(f"{where}: ts must be a finite number")
            continue
        ts = float(e["ts"])
        key: tuple[Any, ...] = (*track, "C", e.get("name")) if ph == "C" else (*track, "thread")
        if ph in "XBEC" and ts < last_ts.get(key, -math.inf):
            problems.append(f"{where}: ts {ts} goes back on its track (previous {last_ts[key]})")
        if ph in "XBEC":
            last_ts[key] = ts
        if ph == "X":
            if not _is_num(e.get("dur")) or e["dur"] < 0:
                problems.append(f"{where}: X needs dur >= 0")
            else:
                complete.setdefault(track, []).append((ts, ts + float(e["dur"]), i))
            used_threads.add(track)
        elif ph == "B":
            open_b.setdefault(track, []).append(e["name"])
            used_threads.add(track)
        elif ph == "E":
            stack = open_b.get(track) or []
            if not stack:
                problems.append(f"{where}: E without a B on its thread")
            else:
                name = stack.pop()
                if "name" in e and e["name"] != name:
                    problems.append(f"{where}: E {e['name']!r} closes B {name!r}")
        elif ph == "C":
            args = e.get("args")
            if not isinstance(args, dict) or not args or not all(_is_num(v) for v in args.values()):
                problems.append(f"{where}: counter args must be numbers")
        elif ph in ("i", "I"):
            if e.get("s", "t") not in ("g", "p", "t"):
                problems.append(f"{where}: instant scope must be g, p or t")
            if e.get("s", "t") == "t":
                used_threads.add(track)
    for track, names in open_b.items():
        if names:
            problems.append(f"thread {track}: B {names[-1]!r} never ended")
    for track, slices in complete.items():
        problems += _nesting(track, slices)
    for track in sorted(used_threads - named_threads, key=str):
        problems.append(f"thread {track} has events but no thread_name metadata")
    return problems


def _nesting(track: tuple[int, int], slices: list[tuple[float, float, int]]) -> list[str]:
    """Complete events on one thread must nest: each starts after the enclosing one ends, or ends inside it."""
    problems = []
    stack: list[tuple[float, float, int]] = []
    for start, end, i in sorted(slices, key=lambda s: (s[0], -s[1], s[2])):
        while stack and stack[-1][1] <= start:
            stack.pop()
        if stack and end > stack[-1][1]:
            problems.append(f"thread {track}: event {i} [{start}, {end}] overlaps event {stack[-1][2]} "
                            f"[{stack[-1][0]}, {stack[-1][1]}] without nesting")
        stack.append((start, end, i))
    return problems


def validate_speedscope(doc: Any) -> list[str]:
    import jsonschema

    schema = json.loads(SPEEDSCOPE_SCHEMA.read_text())
    validator = jsonschema.Draft7Validator({**schema, "$ref": "#/definitions/FileFormat.File"})
    problems = [f"schema: {e.message} at {'/'.join(map(str, e.path))}" for e in validator.iter_errors(doc)]
    if problems:
        return problems
    n_frames = len(doc["shared"]["frames"])
    for p, profile in enumerate(doc["profiles"]):
        if profile["type"] != "sampled":
            continue
        if len(profile["samples"]) != len(profile["weights"]):
            problems.append(f"profile {p}: {len(profile['samples'])} samples but {len(profile['weights'])} weights")
        if any(not 0 <= f < n_frames or f != int(f) for stack in profile["samples"] for f in stack):
            problems.append(f"profile {p}: a frame index is out of range")
        if any(w < 0 for w in profile["weights"]):
            problems.append(f"profile {p}: a negative weight")
        if profile["endValue"] < profile["startValue"]:
            problems.append(f"profile {p}: endValue before startValue")
    return problems
