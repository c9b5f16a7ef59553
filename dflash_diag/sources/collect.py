"""Gather an :class:`Observation` of one process: py-spy stacks, /proc per-thread CPU, NVML, the probe board.

Two forms over one engine:

- :class:`Collector` (``doctor``, ``snapshot``, ``top --batch``): sample for a fixed duration, return one
  Observation; notices the process exiting and returns what it had (``process_alive=False``).
- :class:`LiveSampler` (``top``): a daemon thread samples continuously; ``poll()`` returns the last
  ``window_s`` seconds as an immutable Observation (safe to hand to another thread).

Rates (why these defaults): stacks at 5 Hz through ``py-spy dump --nonblocking`` -- a dump costs py-spy
~6-40 ms of CPU and the trainer nothing (no pause), so 5 Hz keeps py-spy under ~10% of one core even on a
busy box and still gives 150 samples per 30 s window (share resolution < 1%). /proc every 0.5 s (tens of µs
per thread), NVML every 1 s (the driver's own utilisation counters update about that often), the board every
0.5 s (probes publish at most at 2 Hz).

Sampling never hurts the trainer (adaptive rate): the stack rate is capped so that py-spy stays under
``MAX_PYSPY_DUTY`` of one core (rate <= duty / mean dump time), and halved (to at most 2 Hz) while the trainer
saturates the cores it may run on -- then py-spy would steal CPU from it. Native dumps pause the process, so
they are rate-limited by :class:`~dflash_diag.sources.pyspy.PySpy` (at most one per 5 s and at most 5% of wall
time paused).
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from dflash_contract import redact
from dflash_diag.errors import AttachError, DflashDiagError, ExitCode
from dflash_diag.model import NA, Board, GpuSample, Maybe, Observation, ProcThreadSample, StackSample
from dflash_diag.model.text import printable
from dflash_diag.sources import procfs
from dflash_diag.sources.board import read_board
from dflash_diag.sources.lines import LineCache
from dflash_diag.sources.pyspy import PySpy, PySpyOutputError

DEFAULT_RATE_HZ = 5.0
MIN_RATE_HZ = 0.2
MAX_RATE_HZ = 50.0
DEFAULT_WINDOW_S = 30.0
PROC_INTERVAL_S = 0.5
NVML_INTERVAL_S = 1.0
BOARD_INTERVAL_S = 0.5
MAX_PYSPY_DUTY = 0.10  # py-spy may use at most this share of one core
SATURATED_SHARE = 0.90  # the trainer uses >= 90% of the cores it may run on
SATURATED_RATE_HZ = 2.0
LINE_FRAMES = 3  # source text is recorded for this many innermost Python frames per thread
MAX_LINES = 20_000
EXIT_GRACE_S = 2.0  # a dump that failed this shortly before the process was gone failed because it was exiting
MAX_STACKS = 36_000  # 1 h at 10 Hz: hard cap on memory whatever the window


class StackSource(Protocol):
    def dump(self) -> StackSample: ...


class GpuSource(Protocol):
    def sample(self) -> Maybe[tuple[GpuSample, ...]]: ...


BoardReader = Callable[[int], "Board | NA | None"]
ProcReader = Callable[[int], tuple[ProcThreadSample, ...]]  # raises AttachError(NO_PROCESS) when the pid is gone
Progress = Callable[[float, float], None]  # (elapsed_s, total_s)


def default_board_reader(board_dir: str | None = None) -> BoardReader:
    """``sources.board.read_board`` for the live process, returning NA (with the reader's reason) on failure."""

    def reader(pid: int) -> Board | NA | None:
        try:
            return read_board(pid, board_dir)
        except DflashDiagError as exc:
            return NA(str(exc))
        except OSError as exc:
            return NA(f"cannot read the probe board: {exc.strerror or exc}")

    return reader


@dataclass
class _Buffers:
    stacks: deque[StackSample]
    proc: deque[tuple[ProcThreadSample, ...]]
    gpus: deque[tuple[GpuSample, ...]]
    boards: deque[Board]


class _Engine:
    """The sampling schedule and buffers shared by Collector and LiveSampler: one thread ticks, any thread reads."""

    def __init__(
        self,
        pid: int,
        *,
        rate_hz: float,
        native: bool,
        pyspy: StackSource | None,
        nvml: GpuSource | None,
        board_reader: BoardReader | None,
        board_dir: str | None,
        clock: Callable[[], float],
        wall_clock: Callable[[], float],
        proc_interval_s: float,
        nvml_interval_s: float,
        board_interval_s: float,
        redact_argv: Callable[[Sequence[str]], Sequence[str]] | None,
        lines: Callable[[str, int], str | None] | None,
        adaptive: bool,
        proc_reader: ProcReader | None = None,
        cpu_cores: int | None = None,
    ) -> None:
        self.pid = pid
        self.clock = clock
        self.wall = wall_clock
        self.requested_rate_hz = _clamp_rate(rate_hz)
        self.pyspy: StackSource = pyspy if pyspy is not None else PySpy(pid, native=native)
        self.nvml = nvml if nvml is not None else _default_nvml()
        self.board_reader = board_reader if board_reader is not None else default_board_reader(board_dir)
        self.proc_interval_s = proc_interval_s
        self.nvml_interval_s = nvml_interval_s
        self.board_interval_s = board_interval_s
        self.lines = lines if lines is not None else LineCache()
        self.adaptive = adaptive
        self.buf = _Buffers(deque(maxlen=MAX_STACKS), deque(maxlen=MAX_STACKS), deque(maxlen=MAX_STACKS),
                            deque(maxlen=MAX_STACKS))
        self.source_lines: dict[str, str] = {}
        # Guards the buffers and counters: the sampler thread appends while poll() (another thread) reads.
        # I/O (py-spy, /proc, NVML, the board, source files) always happens outside it.
        self.lock = threading.Lock()
        self.gpu_na: NA | None = None
        self.board_na: NA | None = None
        self.warnings: deque[str] = deque(maxlen=20)
        self.alive = True
        self.exited_at_s: float | None = None
        self.dumps = 0
        self.dump_failures = 0
        self.last_dump_error: str | None = None
        self.dump_durations: deque[float] = deque(maxlen=8)
        self.saturated = False
        self._last_board_key: tuple[int, int] | None = None
        self._failure_times: deque[float] = deque(maxlen=64)
        self._start_ticks: int | None = None
        self._cpu_allowed = cpu_cores if cpu_cores is not None else _allowed_cores(pid)
        self.proc_reader: ProcReader = proc_reader if proc_reader is not None else (
            lambda p: procfs.read_threads(p, clock=clock)
        )
        self.next_stack_s = self.next_proc_s = self.next_nvml_s = self.next_board_s = clock()
        try:
            self._start_ticks = procfs.process_start_ticks(pid)
            argv = procfs.read_cmdline(pid)
        except AttachError:
            argv = ()
        self.cmdline = tuple(printable(a) for a in (redact_argv or redact.redact_argv)(argv))

    # --- rates -----------------------------------------------------------------------------------------

    @property
    def effective_rate_hz(self) -> float:
        return self.rate_and_reason()[0]

    def rate_and_reason(self) -> tuple[float, str | None]:
        """The stack rate in force and, when it is below the requested one, why."""
        rate = self.requested_rate_hz
        reason = None
        if not self.adaptive:
            return rate, None
        costs = tuple(self.dump_durations)
        if costs:
            mean_s = sum(costs) / len(costs)
            cap = MAX_PYSPY_DUTY / mean_s if mean_s > 0 else rate
            if cap < rate:
                rate = max(MIN_RATE_HZ, cap)
                reason = f"py-spy dumps cost {mean_s * 1000:.0f} ms of CPU each"
        if self.saturated and rate > SATURATED_RATE_HZ:
            rate = min(rate, max(MIN_RATE_HZ, min(SATURATED_RATE_HZ, self.requested_rate_hz / 2)))
            reason = f"the trainer saturates its {self._cpu_allowed} CPU cores"
        return rate, reason

    # --- one step --------------------------------------------------------------------------------------

    def check_alive(self) -> bool:
        if not self.alive or procfs.process_alive(self.pid, self._start_ticks):
            return self.alive
        with self.lock:
            if not self.alive:
                return False
            self.alive = False
            self.exited_at_s = self.clock()
            # Dumps that failed just before: the interpreter was shutting down. The exit, not py-spy failures.
            at_exit = sum(1 for t in self._failure_times if self.exited_at_s - t < EXIT_GRACE_S)
            self.dump_failures -= at_exit
            self._failure_times.clear()
            self.warnings.append(f"process {self.pid} exited; showing the data gathered before it did")
            return False

    def tick(self, *, first: bool = False) -> float:
        """Do whatever is due; return the monotonic time of the next due reading. Raises AttachError on ``first``."""
        now = self.clock()
        if now >= self.next_proc_s:
            self._sweep_proc()
            self.next_proc_s = now + self.proc_interval_s
        if now >= self.next_board_s:
            self._read_board()
            self.next_board_s = now + self.board_interval_s
        if now >= self.next_nvml_s:
            self._read_nvml()
            self.next_nvml_s = now + self.nvml_interval_s
        if now >= self.next_stack_s and self.alive:
            self._dump(first=first)
            self.next_stack_s = max(now + 1.0 / self.effective_rate_hz, self.clock())
        return min(self.next_stack_s, self.next_proc_s, self.next_board_s, self.next_nvml_s)

    def _dump(self, *, first: bool) -> None:
        self.dumps += 1
        try:
            sample = self.pyspy.dump()
        except AttachError as exc:
            if not self.check_alive():
                if first:
                    raise AttachError(f"process {self.pid} exited", ExitCode.NO_PROCESS) from None
                return  # the process ended between two dumps: not a py-spy failure
            with self.lock:
                self.dump_failures += 1
                self._failure_times.append(self.clock())
                self.last_dump_error = str(exc)
            if first:
                raise
            return
        except PySpyOutputError as exc:
            # A nonblocking dump reads memory the process is changing: a torn read is one failed sample,
            # not the end of sampling (if every dump fails, the caller sees an empty window).
            with self.lock:
                self.dump_failures += 1
                self._failure_times.append(self.clock())
                self.last_dump_error = str(exc)
            return
        new_lines = self._read_lines(sample)  # file reads: outside the lock
        with self.lock:
            if not sample.native:
                # py-spy's CPU cost when the source knows it (wall time also counts waiting for a busy CPU).
                cost_s = getattr(self.pyspy, "last_cpu_s", None)
                self.dump_durations.append(cost_s if isinstance(cost_s, float) else sample.duration_s)
            self.buf.stacks.append(sample)
            if len(self.source_lines) < MAX_LINES:
                self.source_lines.update(new_lines)

    def _read_lines(self, sample: StackSample) -> dict[str, str]:
        out: dict[str, str] = {}
        for thread in sample.threads:
            n = 0
            for frame in thread.frames:
                if frame.native:
                    continue
                key = f"{frame.filename}:{frame.line}"
                if key not in self.source_lines and key not in out:
                    text = self.lines(frame.filename, frame.line)
                    if text is not None:
                        out[key] = text
                n += 1
                if n >= LINE_FRAMES:
                    break
        return out

    def _sweep_proc(self) -> None:
        try:
            sweep = self.proc_reader(self.pid)
        except AttachError as exc:
            if exc.exit_code == ExitCode.NO_PROCESS:
                self.check_alive()
            return
        with self.lock:
            share = _cpu_share(self.buf.proc[-1], sweep) if self.buf.proc else None
            if share is not None and self._cpu_allowed:
                self.saturated = share >= SATURATED_SHARE * self._cpu_allowed
            self.buf.proc.append(sweep)
        self.check_alive()

    def _read_nvml(self) -> None:
        if self.nvml is None:
            self.gpu_na = NA("no NVML source")
            return
        result = self.nvml.sample()
        with self.lock:
            if isinstance(result, NA):
                self.gpu_na = result
            else:
                self.buf.gpus.append(result)

    def _read_board(self) -> None:
        if self.board_reader is None:
            return
        board = self.board_reader(self.pid)
        if board is None:
            self.board_na = NA("no probe board for this process")
            return
        if isinstance(board, NA):
            self.board_na = board
            return
        key = (board.writer.start_time_ticks, board.seq)
        if key == self._last_board_key:
            return  # the same version again: boards are deduplicated by (writer, seq)
        with self.lock:
            self._last_board_key = key
            self.buf.boards.append(board)

    # --- snapshot --------------------------------------------------------------------------------------

    def observation(self, since_s: float | None, now_s: float) -> Observation:
        """The readings with monotonic time >= ``since_s`` (all when None), as an immutable Observation."""
        with self.lock:
            return self._observation(since_s, now_s)

    def _observation(self, since_s: float | None, now_s: float) -> Observation:
        stacks = tuple(s for s in self.buf.stacks if since_s is None or s.monotonic_s >= since_s)
        proc = tuple(p for p in self.buf.proc if since_s is None or (p and p[0].monotonic_s >= since_s))
        gpus_list = tuple(g for g in self.buf.gpus if since_s is None or (g and g[0].monotonic_s >= since_s))
        first_s = min((x for x in (stacks[0].monotonic_s if stacks else None,
                                     proc[0][0].monotonic_s if proc else None) if x is not None), default=now_s)
        # The window covers what was gathered: a LiveSampler polled 2 s after attaching has a 2 s window, not 30.
        start_s = max(since_s, first_s) if since_s is not None else first_s
        wall_now = self.wall()
        started_wall = wall_now - (now_s - start_s)
        boards_in = tuple(b for b in self.buf.boards if since_s is None or b.wall_time_s >= started_wall - 1.0)
        if not boards_in and self.buf.boards:
            boards_in = (self.buf.boards[-1],)  # a slow publisher: keep the newest board rather than none
        gpus: Maybe[tuple[tuple[GpuSample, ...], ...]] = (
            gpus_list if gpus_list or self.gpu_na is None else self.gpu_na
        )
        board_na = self.board_na if self.board_na is not None else NA("no probe board")  # NA is falsy: no `or`
        boards: Maybe[tuple[Board, ...]] = boards_in if boards_in else board_na
        wanted = {f"{f.filename}:{f.line}" for s in stacks for t in s.threads for f in t.frames[:8] if not f.native}
        lines = {k: v for k, v in self.source_lines.items() if k in wanted}
        return Observation(
            pid=self.pid,
            cmdline=self.cmdline,
            started_wall_s=started_wall,
            window_s=max(0.0, now_s - start_s),
            stacks=stacks,
            proc=proc,
            gpus=gpus,
            boards=boards,
            process_alive=self.alive,
            warnings=tuple(self.warnings) + self._status_warnings(),
            source_lines=lines,
        )

    def _status_warnings(self) -> tuple[str, ...]:
        out = []
        if self.dump_failures:
            out.append(f"py-spy failed {self.dump_failures} of {self.dumps} dumps (last: {self.last_dump_error})")
        rate, reason = self.rate_and_reason()
        if reason is not None and rate < self.requested_rate_hz:
            out.append(f"sampling backed off to {rate:.1f} Hz (asked {self.requested_rate_hz:.1f}): {reason}")
        return tuple(out)

    def prune(self, before_s: float) -> None:
        with self.lock:
            self._prune(before_s)

    def _prune(self, before_s: float) -> None:
        for buf in (self.buf.stacks,):
            while buf and buf[0].monotonic_s < before_s:
                buf.popleft()
        while self.buf.proc and self.buf.proc[0] and self.buf.proc[0][0].monotonic_s < before_s:
            self.buf.proc.popleft()
        while self.buf.gpus and self.buf.gpus[0] and self.buf.gpus[0][0].monotonic_s < before_s:
            self.buf.gpus.popleft()
        while len(self.buf.boards) > 1 and self.buf.boards[0].wall_time_s < self.wall() - (self.clock() - before_s):
            self.buf.boards.popleft()
        if len(self.source_lines) >= MAX_LINES:
            self.source_lines.clear()  # cheap to rebuild from disk; keeps memory bounded on long sessions


def _clamp_rate(rate_hz: float) -> float:
    if not rate_hz > 0:
        raise ValueError(f"rate_hz must be > 0, got {rate_hz}")
    return min(MAX_RATE_HZ, max(MIN_RATE_HZ, float(rate_hz)))


def _default_nvml() -> GpuSource | None:
    try:
        from dflash_diag.sources.nvml import NvmlSource
    except ImportError:
        return None
    return NvmlSource()


def _allowed_cores(pid: int) -> int:
    try:
        return len(os.sched_getaffinity(pid))
    except OSError:
        return os.cpu_count() or 1


def _cpu_share(before: tuple[ProcThreadSample, ...], after: tuple[ProcThreadSample, ...]) -> float | None:
    """Cores' worth of CPU the process used between two sweeps (sum of per-thread on-CPU deltas); None when the
    sweeps are too close together to say."""
    if not before or not after:
        return None
    dt = after[0].monotonic_s - before[0].monotonic_s
    if dt < 0.1:
        return None
    old = {p.tid: p.run_ns for p in before}
    used_ns = sum(max(0, p.run_ns - old[p.tid]) for p in after if p.tid in old)
    return used_ns / 1e9 / dt


class Collector:
    """Sample one process for a fixed duration (``doctor``, ``snapshot``, ``top --batch``)."""

    def __init__(
        self,
        pid: int,
        *,
        rate_hz: float = DEFAULT_RATE_HZ,
        native: bool = False,
        pyspy: StackSource | None = None,
        nvml: GpuSource | None = None,
        board_reader: BoardReader | None = None,
        board_dir: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        proc_interval_s: float = PROC_INTERVAL_S,
        nvml_interval_s: float = NVML_INTERVAL_S,
        board_interval_s: float = BOARD_INTERVAL_S,
        redact_argv: Callable[[Sequence[str]], Sequence[str]] | None = None,
        lines: Callable[[str, int], str | None] | None = None,
        adaptive: bool = True,
        proc_reader: ProcReader | None = None,
        cpu_cores: int | None = None,
    ) -> None:
        self.pid = pid
        self._sleep = sleep
        self._engine = _Engine(
            pid, rate_hz=rate_hz, native=native, pyspy=pyspy, nvml=nvml, board_reader=board_reader,
            board_dir=board_dir, clock=clock, wall_clock=wall_clock, proc_interval_s=proc_interval_s,
            nvml_interval_s=nvml_interval_s, board_interval_s=board_interval_s, redact_argv=redact_argv,
            lines=lines, adaptive=adaptive, proc_reader=proc_reader, cpu_cores=cpu_cores,
        )

    @property
    def effective_rate_hz(self) -> float:
        return self._engine.effective_rate_hz

    def collect(self, duration_s: float, progress: Progress | None = None) -> Observation:
        """Sample for ``duration_s``; AttachError when the very first dump fails (with the diagnosis).

        If the process exits meanwhile, returns what was gathered with ``process_alive=False``.
        """
        engine = self._engine
        if not engine.check_alive():
            raise AttachError(f"no process with PID {self.pid} (it exited or never existed)", ExitCode.NO_PROCESS)
        start = engine.clock()
        deadline = start + max(0.0, duration_s)
        first = True
        while True:
            due = engine.tick(first=first)
            first = first and not engine.buf.stacks
            now = engine.clock()
            if progress is not None:
                progress(min(now - start, duration_s), duration_s)
            if not engine.alive or now >= deadline:
                break
            self._sleep(max(0.0, min(due, deadline) - now))
        if engine.alive:
            engine._sweep_proc()  # a last /proc reading so CPU % covers the whole window
        end = engine.clock()
        return engine.observation(start, end)


class LiveSampler:
    """Continuous sampling on a daemon thread; ``poll()`` returns the last ``window_s`` as an Observation."""

    def __init__(
        self,
        pid: int,
        *,
        rate_hz: float = DEFAULT_RATE_HZ,
        native: bool = False,
        window_s: float = DEFAULT_WINDOW_S,
        pyspy: StackSource | None = None,
        nvml: GpuSource | None = None,
        board_reader: BoardReader | None = None,
        board_dir: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        proc_interval_s: float = PROC_INTERVAL_S,
        nvml_interval_s: float = NVML_INTERVAL_S,
        board_interval_s: float = BOARD_INTERVAL_S,
        redact_argv: Callable[[Sequence[str]], Sequence[str]] | None = None,
        lines: Callable[[str, int], str | None] | None = None,
        adaptive: bool = True,
        proc_reader: ProcReader | None = None,
        cpu_cores: int | None = None,
    ) -> None:
        if not window_s > 0:
            raise ValueError(f"window_s must be > 0, got {window_s}")
        self.pid = pid
        self.window_s = float(window_s)
        self._start_lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._engine = _Engine(
            pid, rate_hz=rate_hz, native=native, pyspy=pyspy, nvml=nvml, board_reader=board_reader,
            board_dir=board_dir, clock=clock, wall_clock=wall_clock, proc_interval_s=proc_interval_s,
            nvml_interval_s=nvml_interval_s, board_interval_s=board_interval_s, redact_argv=redact_argv,
            lines=lines, adaptive=adaptive, proc_reader=proc_reader, cpu_cores=cpu_cores,
        )

    # --- control (any thread) --------------------------------------------------------------------------

    @property
    def rate_hz(self) -> float:
        return self._engine.requested_rate_hz

    @property
    def effective_rate_hz(self) -> float:
        return self._engine.effective_rate_hz

    # The setters never wait for a dump in progress (they run on the UI thread): plain attribute stores.
    def set_rate(self, rate_hz: float) -> float:
        rate = _clamp_rate(rate_hz)
        self._engine.requested_rate_hz = rate
        self._engine.next_stack_s = self._engine.clock()
        self._wake.set()
        return rate

    def set_native(self, native: bool) -> bool:
        pyspy = self._engine.pyspy
        if hasattr(pyspy, "native"):
            pyspy.native = native
            if native and hasattr(pyspy, "request_native"):
                pyspy.request_native()
        self._wake.set()
        return native

    def set_window(self, window_s: float) -> None:
        if window_s > 0:
            self.window_s = float(window_s)

    def poll(self) -> Observation:
        """The last ``window_s`` seconds. The first call attaches synchronously (AttachError on failure)."""
        with self._start_lock:
            if self._thread is None:
                if not self._engine.check_alive():
                    raise AttachError(f"no process with PID {self.pid} (it exited or never existed)",
                                      ExitCode.NO_PROCESS)
                self._engine.tick(first=True)
                self._thread = threading.Thread(target=self._run, name="dflash-diag-sampler", daemon=True)
                self._thread.start()
        engine = self._engine
        # After the process exits the window freezes at the exit, so the last data stays on screen.
        exited = engine.exited_at_s
        now = exited if exited is not None else engine.clock()
        return engine.observation(now - self.window_s, now)

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=15.0)

    # --- the sampler thread ----------------------------------------------------------------------------

    def _run(self) -> None:
        engine = self._engine
        while not self._stop.is_set():
            try:
                due = engine.tick()
            except Exception as exc:  # never die silently: say it, slow down, keep the last data
                with engine.lock:
                    engine.warnings.append(f"sampler error: {type(exc).__name__}: {exc}")
                due = engine.clock() + 1.0
            engine.prune(engine.clock() - self.window_s - 2.0)
            alive = engine.alive
            delay = max(0.0, due - engine.clock())
            if not alive:
                return
            # Sleep until the next reading is due (Event.wait: no busy loop), or until set_rate/close wakes us.
            self._wake.wait(delay)
            self._wake.clear()
