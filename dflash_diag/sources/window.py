"""The readings a sampler has gathered, bounded, and the immutable :class:`Observation` of any time window of them.

Not thread-safe by itself: the scheduler (sources/collect.py) holds its lock around every call, and does its I/O
(py-spy, /proc, NVML, the board, source files) outside it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from dflash_diag.model import (
    NA,
    Board,
    GpuSample,
    Maybe,
    Observation,
    ProcessSample,
    ProcThreadSample,
    StackSample,
)
from dflash_diag.model.sched import OsFacts, OutsideWait, SchedSample

MAX_READINGS = 36_000  # 1 h at 10 Hz: hard cap on memory whatever the window
MAX_LINES = 20_000  # recorded source lines before the cache is dropped (cheap to read again)
LINES_PER_STACK = 8  # an Observation keeps the text of this many innermost frames of each stack


@dataclass(frozen=True, slots=True)
class WindowMeta:
    """What the scheduler knows about the whole session, stamped on every Observation."""

    pid: int
    cmdline: tuple[str, ...]
    process_alive: bool
    warnings: tuple[str, ...]


class SampleWindow:
    def __init__(self, max_readings: int = MAX_READINGS) -> None:
        self.stacks: deque[StackSample] = deque(maxlen=max_readings)
        self.proc: deque[tuple[ProcThreadSample, ...]] = deque(maxlen=max_readings)
        self.gpus: deque[tuple[GpuSample, ...]] = deque(maxlen=max_readings)
        self.resources: deque[ProcessSample] = deque(maxlen=max_readings)
        self.children: deque[StackSample] = deque(maxlen=max_readings)
        self.boards: deque[Board] = deque(maxlen=max_readings)
        self.sched: deque[SchedSample] = deque(maxlen=max_readings)
        self.outside_waits: deque[OutsideWait] = deque(maxlen=max_readings)
        self.os_facts: OsFacts | None = None
        self.source_lines: dict[str, str] = {}
        self.gpu_na: NA | None = None
        self.board_na: NA | None = None
        self._last_board_key: tuple[int, int] | None = None

    # --- adding --------------------------------------------------------------------------------------------

    def add_stack(self, sample: StackSample, lines: dict[str, str]) -> None:
        self.stacks.append(sample)
        if len(self.source_lines) < MAX_LINES:
            self.source_lines.update(lines)

    def add_proc(self, sweep: tuple[ProcThreadSample, ...]) -> None:
        self.proc.append(sweep)

    def add_sched(self, sample: SchedSample) -> None:
        self.sched.append(sample)

    def add_outside_waits(self, waits: tuple[OutsideWait, ...]) -> None:
        self.outside_waits.extend(waits)

    def set_os_facts(self, facts: OsFacts) -> None:
        self.os_facts = facts

    def add_child(self, sample: StackSample) -> None:
        self.children.append(sample)

    def add_resources(self, sample: ProcessSample) -> None:
        self.resources.append(sample)

    def add_gpus(self, result: Maybe[tuple[GpuSample, ...]]) -> None:
        if isinstance(result, NA):
            self.gpu_na = result
        else:
            self.gpus.append(result)

    def add_board(self, board: Board | NA | None) -> bool:
        """Keep a board version once (boards are deduplicated by writer and ``seq``); False when not new."""
        if board is None:
            self.board_na = NA("no probe board for this process")
            return False
        if isinstance(board, NA):
            self.board_na = board
            return False
        key = (board.writer.start_time_ticks, board.seq)
        if key == self._last_board_key:
            return False
        self._last_board_key = key
        self.boards.append(board)
        return True

    # --- reading -------------------------------------------------------------------------------------------

    def observation(self, meta: WindowMeta, since_s: float | None, now_s: float, wall_now_s: float) -> Observation:
        """The readings with monotonic time >= ``since_s`` (all when None), as an immutable Observation."""
        stacks = tuple(s for s in self.stacks if since_s is None or s.monotonic_s >= since_s)
        proc = tuple(p for p in self.proc if since_s is None or (p and p[0].monotonic_s >= since_s))
        gpus_list = tuple(g for g in self.gpus if since_s is None or (g and g[0].monotonic_s >= since_s))
        first_s = min([s.monotonic_s for s in stacks[:1]] + [p[0].monotonic_s for p in proc[:1] if p], default=now_s)
        # The window covers what was gathered: a LiveSampler polled 2 s after attaching has a 2 s window, not 30.
        start_s = max(since_s, first_s) if since_s is not None else first_s
        started_wall = wall_now_s - (now_s - start_s)
        boards_in = tuple(b for b in self.boards if since_s is None or b.wall_time_s >= started_wall - 1.0)
        if not boards_in and self.boards:
            boards_in = (self.boards[-1],)  # a slow publisher: keep the newest board rather than none
        gpus: Maybe[tuple[tuple[GpuSample, ...], ...]] = (
            gpus_list if gpus_list or self.gpu_na is None else self.gpu_na
        )
        board_na = self.board_na if self.board_na is not None else NA("no probe board")  # NA is falsy: no `or`
        boards: Maybe[tuple[Board, ...]] = boards_in if boards_in else board_na
        return Observation(
            pid=meta.pid,
            cmdline=meta.cmdline,
            started_wall_s=started_wall,
            window_s=max(0.0, now_s - start_s),
            stacks=stacks,
            proc=proc,
            gpus=gpus,
            boards=boards,
            process_alive=meta.process_alive,
            warnings=meta.warnings,
            source_lines=self._lines_of(stacks),
            resources=tuple(r for r in self.resources if since_s is None or r.monotonic_s >= since_s),
            children=tuple(c for c in self.children if since_s is None or c.monotonic_s >= since_s),
            sched=tuple(x for x in self.sched if since_s is None or x.monotonic_s >= since_s),
            os_facts=self.os_facts,
            outside_waits=tuple(w for w in self.outside_waits if since_s is None or w.monotonic_s >= since_s),
        )

    def _lines_of(self, stacks: Sequence[StackSample]) -> dict[str, str]:
        wanted = {f"{f.filename}:{f.line}" for s in stacks for t in s.threads
                  for f in t.frames[:LINES_PER_STACK] if not f.native}
        return {k: v for k, v in self.source_lines.items() if k in wanted}

    # --- forgetting ----------------------------------------------------------------------------------------

    def prune(self, before_s: float, before_wall_s: float) -> None:
        """Drop readings older than ``before_s`` (monotonic) / boards older than ``before_wall_s`` (keeps one)."""
        while self.stacks and self.stacks[0].monotonic_s < before_s:
            self.stacks.popleft()
        while self.proc and self.proc[0] and self.proc[0][0].monotonic_s < before_s:
            self.proc.popleft()
        while self.children and self.children[0].monotonic_s < before_s:
            self.children.popleft()
        while self.resources and self.resources[0].monotonic_s < before_s:
            self.resources.popleft()
        while self.sched and self.sched[0].monotonic_s < before_s:
            self.sched.popleft()
        while self.outside_waits and self.outside_waits[0].monotonic_s < before_s:
            self.outside_waits.popleft()
        while self.gpus and self.gpus[0] and self.gpus[0][0].monotonic_s < before_s:
            self.gpus.popleft()
        while len(self.boards) > 1 and self.boards[0].wall_time_s < before_wall_s:
            self.boards.popleft()
        if len(self.source_lines) >= MAX_LINES:
            self.source_lines.clear()  # cheap to rebuild from disk; keeps memory bounded on long sessions
