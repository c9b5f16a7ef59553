"""One process's window as every part of the analysis reads it: the observation, the per-thread aggregates and each
sampled thread's states in time order, the source facts of each sampled line, the boards, the process's CPU. Pure.

Below the wait-for graph (``analysis.waits``) and the rules (``findings._context.Context`` extends it), so both read
the window one way.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

from dflash_diag.analysis.peers import SiteKey, child_places, wait_sites
from dflash_diag.analysis.threads import thread_identity
from dflash_diag.model import (
    Board,
    Observation,
    SourceLine,
    StackSample,
    ThreadSample,
    ThreadState,
    ThreadStats,
)
from dflash_diag.model.sched import OutsideWait
from dflash_diag.model.stacks import Frame

Row = tuple[ThreadSample, ThreadState]  # one sample of one thread, and the state the classifier gave it


def classified(obs: Observation,
               threads: tuple[ThreadStats, ...]) -> Iterator[tuple[StackSample, ThreadSample, ThreadStats, ThreadState]]:
    """Every sampled thread of every stack sample, in time order, with its aggregate and the state its timeline
    holds for that sample (the classifier's, in the order the thread was sampled)."""
    by_id = {t.os_thread_id: t for t in threads if t.os_thread_id is not None}
    by_name = {t.name: t for t in threads if t.os_thread_id is None}
    cursor: dict[int, int] = {}
    for sample in sorted(obs.stacks, key=lambda s: s.monotonic_s):
        for thread in sample.threads:
            stats = by_id.get(thread.os_thread_id) if thread.os_thread_id is not None else by_name.get(thread.name or "")
            if stats is None:
                continue
            ident = thread_identity(thread)
            i = cursor.get(ident, 0)
            if i < len(stats.timeline):
                yield sample, thread, stats, stats.timeline[i]
                cursor[ident] = i + 1


def process_cpu_pct(obs: Observation) -> float | None:
    """% of one core the whole process used between the first and last /proc readings of the window."""
    sweeps = [s for s in obs.proc if s]
    if len(sweeps) < 2:
        return None
    first, last = sweeps[0], sweeps[-1]
    dt = last[0].monotonic_s - first[0].monotonic_s
    if dt <= 0.5:
        return None
    before = {t.tid: t.run_ns for t in first}
    used_ns = sum(max(0, t.run_ns - before[t.tid]) for t in last if t.tid in before)
    return 100.0 * used_ns / 1e9 / dt


@dataclass(frozen=True)
class Sampled:
    """The window of one process and its per-thread aggregates, with what is read from them more than once."""

    obs: Observation
    threads: tuple[ThreadStats, ...]

    @cached_property
    def code(self) -> dict[tuple[str, int], SourceLine]:
        """What the files on disk say about each sampled frame location (``sources.outside``)."""
        return {(c.filename, c.line): c for c in self.obs.code}

    def line_text(self, frame: Frame) -> str | None:
        """The text of a frame's line: recorded with the stacks, else read from disk with the outside evidence."""
        text = self.obs.line_text(frame.filename, frame.line)
        if text is None:
            found = self.code.get((frame.filename, frame.line))
            text = found.text if found is not None else None
        return text

    @cached_property
    def outside_sites(self) -> dict[SiteKey, OutsideWait]:
        """The lines where a thread was seen blocked on another process (``peers.wait_sites``)."""
        return wait_sites(self.obs)

    @cached_property
    def child_places(self) -> dict[int, str]:
        """Where each sampled child process spends its time in library code, by PID (``peers.child_places``)."""
        return child_places(self.obs)

    @cached_property
    def rows(self) -> dict[int, list[Row]]:
        """Every sampled thread's samples with the state each was classified in, in time order, by identity."""
        out: dict[int, list[Row]] = {}
        for _, thread, _, state in classified(self.obs, self.threads):
            out.setdefault(thread_identity(thread), []).append((thread, state))
        return out

    def stats_rows(self, stats: ThreadStats) -> list[tuple[ThreadSample, ThreadState]]:
        for ident, rows in self.rows.items():
            if (stats.os_thread_id is not None and ident == stats.os_thread_id) or (
                stats.os_thread_id is None and rows and rows[0][0].name == stats.name
            ):
                return rows
        return []

    @property
    def board(self) -> Board | None:
        return self.obs.board

    @property
    def first_board(self) -> Board | None:
        boards = self.obs.boards
        return boards[0] if isinstance(boards, tuple) and boards else None


__all__ = ["Row", "Sampled", "classified", "process_cpu_pct"]
