"""Per-thread aggregates over one observation window: state shares, CPU, GIL, top frame, timeline. Pure."""

from __future__ import annotations

import fnmatch
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from dflash_diag.analysis.classify import Classification, LineLookup, explain, gil_holder
from dflash_diag.analysis.stages import StageAssignment, entry_frame, entry_key, infer_from_queues
from dflash_diag.model import (
    NA,
    Board,
    Frame,
    Maybe,
    Observation,
    StackSample,
    ThreadSample,
    ThreadState,
    ThreadStats,
)

STAGE_ORDER = {"target": 0, "drafter": 1, "other": 2}


@dataclass(frozen=True, slots=True)
class StagePatterns:
    """Which thread names belong to which pipeline stage (fnmatch patterns, case-sensitive)."""

    target: tuple[str, ...] = ("target-*",)
    drafter: tuple[str, ...] = ("drafter-*",)

    def stage_of(self, name: str | None) -> str:
        if name:
            if any(fnmatch.fnmatchcase(name, p) for p in self.target):
                return "target"
            if any(fnmatch.fnmatchcase(name, p) for p in self.drafter):
                return "drafter"
        return "other"

    @classmethod
    def parse(cls, target: str | None = None, drafter: str | None = None) -> StagePatterns:
        """From comma-separated CLI values (``--target-threads 'target-*,tgt*'``); None keeps the default."""
        default = cls()
        return cls(
            target=_split(target) or default.target,
            drafter=_split(drafter) or default.drafter,
        )


def _split(value: str | None) -> tuple[str, ...]:
    return tuple(p.strip() for p in (value or "").split(",") if p.strip())


@dataclass(frozen=True, slots=True)
class ClassifiedThread:
    """One thread in one dump, with its state and why."""

    monotonic_s: float
    thread: ThreadSample
    state: ThreadState
    rule: str


def thread_identity(thread: ThreadSample) -> int:
    """Key of a thread across dumps: the kernel TID when py-spy knows it, else the pthread id."""
    return thread.os_thread_id if thread.os_thread_id is not None else thread.thread_id


def classify_stacks(
    stacks: tuple[StackSample, ...], lines: LineLookup | None = None
) -> dict[int, list[ClassifiedThread]]:
    """Every thread of every dump classified, grouped by :func:`thread_identity`, in time order."""
    out: dict[int, list[ClassifiedThread]] = {}
    for sample in sorted(stacks, key=lambda s: s.monotonic_s):
        holder = gil_holder(sample)
        for thread in sample.threads:
            elsewhere = holder is not None and holder != thread.thread_id
            c: Classification = explain(thread, lines=lines, gil_held_elsewhere=elsewhere)
            out.setdefault(thread_identity(thread), []).append(
                ClassifiedThread(sample.monotonic_s, thread, c.state, c.rule)
            )
    return out


def aggregate_threads(
    obs: Observation,
    patterns: StagePatterns = StagePatterns(),  # noqa: B008  (frozen, so a shared default is safe)
    *,
    lines: LineLookup | None = None,
) -> tuple[ThreadStats, ...]:
    """One :class:`ThreadStats` per Python thread seen in ``obs.stacks``: targets, drafters, then the rest.

    ``lines`` defaults to the source lines the collector recorded with the observation.
    """
    return aggregate(obs, patterns, lines=lines)[0]


def aggregate(
    obs: Observation,
    patterns: StagePatterns = StagePatterns(),  # noqa: B008
    *,
    lines: LineLookup | None = None,
) -> tuple[tuple[ThreadStats, ...], StageAssignment]:
    """:func:`aggregate_threads` plus how the stages were told apart (names, board roles or queue use)."""
    lookup = lines if lines is not None else obs.line_text
    grouped = classify_stacks(obs.stacks, lookup)
    board = obs.board
    board_names = _board_names(board)
    devices = _board_devices(board)
    roles = _board_roles(board)
    names = {ident: _name_of(ident, rows, board_names) for ident, rows in grouped.items()}
    assignment = _assign_stages(grouped, names, patterns, roles, obs)
    stats = []
    for ident, rows in grouped.items():
        name = names[ident]
        timeline = tuple(r.state for r in rows)
        n = len(rows)
        counts = Counter(timeline)
        shares = MappingProxyType({state: counts.get(state, 0) / n for state in ThreadState})
        os_tid = rows[-1].thread.os_thread_id
        stats.append(
            ThreadStats(
                name=name,
                os_thread_id=os_tid,
                stage=assignment.stages.get(ident, "other"),
                n_samples=n,
                shares=shares,
                cpu_pct=cpu_pct(obs, os_tid),
                gil_held_pct=100.0 * sum(1 for r in rows if r.thread.owns_gil) / n,
                top_frame=_top_frame(rows),
                gpu_index=devices.get(name),
                timeline=timeline,
                timeline_s=tuple(r.monotonic_s for r in rows),
                entry=_entry(rows),
            )
        )
    stats.sort(key=lambda s: (STAGE_ORDER.get(s.stage, 3), _natural(s.name)))
    return tuple(stats), assignment


def _assign_stages(grouped: Mapping[int, list[ClassifiedThread]], names: Mapping[int, str], patterns: StagePatterns,
                   roles: Mapping[str, str], obs: Observation) -> StageAssignment:
    by_name = {ident: patterns.stage_of(name) for ident, name in names.items()}
    # A thread the patterns miss takes the role the program published for it on the board.
    by_role = {ident: roles[names[ident]] for ident, stage in by_name.items()
               if stage == "other" and roles.get(names[ident]) in ("target", "drafter")}
    if any(s != "other" for s in by_name.values()):
        return StageAssignment(stages={**by_name, **by_role}, how="names")
    if by_role:
        return StageAssignment(stages=by_role, how="board")
    rows = {ident: [(r.thread, r.state) for r in group] for ident, group in grouped.items()}
    return infer_from_queues(rows, obs)


def _entry(rows: list[ClassifiedThread]) -> Frame | None:
    """The most frequent entry frame (function and file; its line is the newest seen)."""
    counts: Counter[tuple[str, str] | None] = Counter()
    newest: dict[tuple[str, str], Frame] = {}
    for row in rows:
        frame = entry_frame(row.thread)
        key = entry_key(frame)
        if key is not None and frame is not None:
            counts[key] += 1
            newest[key] = frame
    if not counts:
        return None
    best = max(counts, key=lambda k: counts[k])
    return newest.get(best) if best is not None else None


def _natural(name: str) -> tuple[Any, ...]:
    return tuple(int(tok) if tok.isdigit() else tok for tok in re.split(r"(\d+)", name))


def _name_of(ident: int, rows: list[ClassifiedThread], board_names: Mapping[int, str]) -> str:
    for row in reversed(rows):
        if row.thread.name:
            return row.thread.name
    if ident in board_names:
        return board_names[ident]
    return f"thread-{ident}"


def _top_frame(rows: list[ClassifiedThread]) -> Frame | None:
    """The most frequent innermost Python frame (ties: the most recent)."""
    counts: Counter[tuple[str, str, int]] = Counter()
    last_seen: dict[tuple[str, str, int], int] = {}
    frames: dict[tuple[str, str, int], Frame] = {}
    for i, row in enumerate(rows):
        frame = next((f for f in row.thread.frames if not f.native), None)
        if frame is None:
            continue
        key = (frame.name, frame.filename, frame.line)
        counts[key] += 1
        last_seen[key] = i
        frames[key] = frame
    if not counts:
        return None
    best = max(counts, key=lambda k: (counts[k], last_seen[k]))
    return frames[best]


def cpu_pct(obs: Observation, tid: int | None) -> Maybe[float]:
    """% of one core the thread used over the window, from the first and last /proc readings of it."""
    if tid is None:
        return NA("py-spy did not report the thread's native id")
    readings = [(p.monotonic_s, p.run_ns) for sweep in obs.proc for p in sweep if p.tid == tid]
    if len(readings) < 2:
        return NA("needs two /proc readings" if obs.proc else "no /proc readings")
    readings.sort()
    (t0, run0), (t1, run1) = readings[0], readings[-1]
    if t1 <= t0:
        return NA("needs two /proc readings at different times")
    return max(0.0, 100.0 * (run1 - run0) / 1e9 / (t1 - t0))


def _board_names(board: Board | None) -> Mapping[int, str]:
    if board is None:
        return {}
    return {int(tid): name for tid, name in board.threads.items() if isinstance(name, str)}


def _board_roles(board: Board | None) -> dict[str, str]:
    """Thread name -> role ("target"/"drafter") from the board's ``app.threads[name].role``."""
    threads = board.app.get("threads") if board is not None and isinstance(board.app, Mapping) else None
    if not isinstance(threads, Mapping):
        return {}
    return {n: i["role"] for n, i in threads.items()
            if isinstance(n, str) and isinstance(i, Mapping) and isinstance(i.get("role"), str)}


_DEVICE = re.compile(r"^(?:cuda|gpu)?:?(\d+)$")


def _board_devices(board: Board | None) -> dict[str, int]:
    """Thread name -> GPU index from the board's ``app.threads[name].device`` ("cuda:1")."""
    if board is None:
        return {}
    threads = board.app.get("threads") if isinstance(board.app, Mapping) else None
    if not isinstance(threads, Mapping):
        return {}
    out = {}
    for name, info in threads.items():
        if not isinstance(name, str) or not isinstance(info, Mapping):
            continue
        device = info.get("device")
        if isinstance(device, int) and not isinstance(device, bool) and device >= 0:
            out[name] = device
        elif isinstance(device, str):
            match = _DEVICE.match(device.strip())
            if match:
                out[name] = int(match.group(1))
    return out
