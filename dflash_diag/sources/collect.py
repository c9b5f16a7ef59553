"""Gather an :class:`Observation` of one process: py-spy stacks, /proc per-thread CPU, NVML, the probe board.

Two forms over one scheduler:

- :class:`Collector` (``doctor``, ``snapshot``, ``top --batch``): sample for a fixed duration, return one
  Observation; notices the process exiting and returns what it had (``process_alive=False``).
- :class:`LiveSampler` (``top``): a daemon thread samples continuously; ``poll()`` returns the last
  ``window_s`` seconds as an immutable Observation (safe to hand to another thread).

The pieces: :class:`~dflash_diag.sources.config.SamplerConfig` (what to do), the readers in
:class:`~dflash_diag.sources.config.SamplerIO`, the pure :class:`~dflash_diag.sources.rate.RatePolicy` (how fast),
the :class:`~dflash_diag.sources.window.SampleWindow` (what was gathered), and the scheduler here (when).

Rates: stacks through ``py-spy dump --nonblocking`` -- no pause of the trainer; a dump costs py-spy ~6-40 ms of
CPU -- at 2-10 Hz by the CPU left free (rate.py), capped so py-spy stays under 10% of one core. /proc every 0.5 s
(tens of µs per thread), NVML every 1 s, the board every 0.5 s. Native dumps pause the process, so
:class:`~dflash_diag.sources.pyspy.PySpy` rate-limits them (at most one per 5 s, at most 5% of wall time paused).
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from dflash_contract import redact
from dflash_diag.errors import AttachError, DflashDiagError, ExitCode
from dflash_diag.model import NA, Board, GpmReading, Observation, ProcThreadSample, StackSample
from dflash_diag.model.sched import OutsideWait
from dflash_diag.model.text import printable
from dflash_diag.sources import procfs
from dflash_diag.sources.board import read_board
from dflash_diag.sources.config import (
    BoardReader,
    CpuReader,
    GpuSource,
    SamplerConfig,
    SamplerIO,
    check_rate,
)
from dflash_diag.sources.lines import LineCache, read_source_lines, stack_frames
from dflash_diag.sources.peers import PeerReader
from dflash_diag.sources.pyspy import PySpy
from dflash_diag.sources.pyspy_json import PySpyOutputError
from dflash_diag.sources.rate import RateDecision, RateInputs, RatePolicy
from dflash_diag.sources.redaction import redactor_for
from dflash_diag.sources.sched import SchedReader, read_os_facts, redacted_facts, redacted_sample
from dflash_diag.sources.storage import StorageReader
from dflash_diag.sources.window import SampleWindow, WindowMeta

EXIT_GRACE_S = 2.0  # a dump that failed this shortly before the process was gone failed because it was exiting
LIVE_CHILD_FACTOR = 5
FACTS_INTERVAL_S = 10.0  # environment, CPUs, libraries: read at the start and again this often (children come later)
LOAD_SPAN_S = 3.0  # the CPU load the rate policy sees is measured over about this long
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


def default_cpu_reader(cpus: frozenset[int] | None, clock: Callable[[], float]) -> CpuReader:
    def reader() -> procfs.CpuTimes | None:
        try:
            return procfs.read_cpu_times(cpus, clock=clock)
        except (OSError, procfs.ProcParseError):
            return None

    return reader


def _default_nvml() -> GpuSource | None:
    try:
        from dflash_diag.sources.nvml import NvmlSource
    except ImportError:
        return None
    return NvmlSource()


def _gpm_begin(nvml: GpuSource | None) -> Any:
    """The first NVML GPM sample of every GPU, when the GPU source can take one (``NvmlSource.gpm_begin``); None
    otherwise (no NVML, a fake without GPM). A failure is a missing reading, never a failed window."""
    begin = getattr(nvml, "gpm_begin", None)
    if begin is None:
        return None
    try:
        window = begin()
    except Exception:  # a broken binding must not take the window down
        return None
    return None if isinstance(window, NA) else window


def _gpm_end(nvml: GpuSource | None, window: Any) -> tuple[GpmReading, ...]:
    """The GPM readings over the window begun by :func:`_gpm_begin` (one per GPU), or none."""
    end = getattr(nvml, "gpm_end", None)
    if window is None or end is None:
        return ()
    try:
        readings = end(window)
    except Exception:
        return ()
    return tuple(r for r in readings if isinstance(r, GpmReading))


def cores_used(before: tuple[ProcThreadSample, ...], after: tuple[ProcThreadSample, ...]) -> float | None:
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


class _Scheduler:
    """When to read what, failure counting and liveness; one thread ticks, any thread reads (under ``lock``)."""

    def __init__(self, pid: int, config: SamplerConfig, io: SamplerIO) -> None:
        self.pid = pid
        self.config = config
        self.clock = io.clock
        self.wall = io.wall_clock
        self.requested_rate_hz: float | None = config.rate_hz
        # A burst is a user's one-off request (snapshot): py-spy runs at normal priority, or on a saturated box the
        # niced dumps would starve and the window end with no sample.
        self.pyspy = io.pyspy if io.pyspy is not None else PySpy(pid, native=config.native, nice=0 if config.burst else 10)
        self.nvml = io.nvml if io.nvml is not None else _default_nvml()
        self.board_reader = io.board_reader if io.board_reader is not None else default_board_reader(config.board_dir)
        # The file a thread blocked in a file system call works on, and its directory's settings: read per sweep,
        # each directory's settings once.
        storage = StorageReader(pid)
        self.proc_reader = io.proc_reader if io.proc_reader is not None else (
            lambda p: procfs.read_threads(p, clock=io.clock, storage=storage)
        )
        self.resource_reader = io.resource_reader if io.resource_reader is not None else (
            lambda p: procfs.read_process(p, clock=io.clock)
        )
        self.child_lister = io.child_lister if io.child_lister is not None else procfs.python_children
        self.child_dumper = io.child_dumper if io.child_dumper is not None else self._dump_child
        self._child_spies: dict[int, PySpy] = {}
        self._child_turn = 0
        cpus = procfs.allowed_cpus(pid)
        self.allowed_cores = io.cpu_cores or (len(cpus) if cpus else os.cpu_count() or 1)
        self.cpu_reader = io.cpu_reader if io.cpu_reader is not None else default_cpu_reader(cpus, io.clock)
        self.lines = io.lines if io.lines is not None else LineCache()
        self.policy = RatePolicy()
        self.window = SampleWindow()
        # Guards the window and the counters: the sampler thread appends while poll() (another thread) reads.
        # I/O (py-spy, /proc, NVML, the board, source files) always happens outside it.
        self.lock = threading.Lock()
        self.warnings: deque[str] = deque(maxlen=20)
        self.alive = True
        self.exited_at_s: float | None = None
        self.dumps = 0
        self.dump_failures = 0
        self.last_dump_error: str | None = None
        self._dump_costs: deque[float] = deque(maxlen=8)
        self._dump_walls: deque[float] = deque(maxlen=4)  # how long recent dumps took, wall time
        self._failure_times: deque[float] = deque(maxlen=64)
        self._loads: deque[tuple[float, tuple[ProcThreadSample, ...], procfs.CpuTimes | None]] = deque(maxlen=64)
        self.target_cores: float | None = None
        self.idle_cores: float | None = None
        self.decision = self.policy.decide(self._rate_inputs(current_hz=0.0))
        self.next_stack_s = self.next_proc_s = self.next_nvml_s = self.next_board_s = io.clock()
        self.next_child_s = io.clock() + config.child_interval_s / 2  # the process's own first dump goes first
        self._start_ticks: int | None = None
        try:
            self._start_ticks = procfs.process_start_ticks(pid)
            argv = procfs.read_cmdline(pid)
        except AttachError:
            argv = ()
        # Everything this scheduler keeps is redacted as it comes in (docs/security.md): the names and paths of
        # every stack sample, their source lines, the warnings; the board reader redacts boards.
        self.redactor = io.redactor if io.redactor is not None else redactor_for(pid)
        self.cmdline = tuple(printable(self.redactor.text(a)) for a in (io.redact_argv or redact.redact_argv)(argv))
        # The scheduler's view and the waits that leave the process (sources.sched, sources.peers).
        self.sched_reader = io.sched_reader if io.sched_reader is not None else SchedReader(pid, clock=io.clock)
        self.facts_reader = io.facts_reader if io.facts_reader is not None else read_os_facts
        self.peer_reader = io.peer_reader if io.peer_reader is not None else PeerReader(
            pid, dumper=self._dump_peer, redact=self.redactor.text, clock=io.clock)
        self.next_sched_s = io.clock()
        self.next_facts_s = io.clock()
        self._last_proc: tuple[ProcThreadSample, ...] = ()
        self._sched_errors = 0

    # --- the rate ------------------------------------------------------------------------------------------

    def _rate_inputs(self, current_hz: float) -> RateInputs:
        costs = tuple(self._dump_costs)
        return RateInputs(
            requested_hz=self.requested_rate_hz,
            current_hz=current_hz,
            dump_cpu_s=sum(costs) / len(costs) if costs else None,
            target_cores=self.target_cores,
            allowed_cores=self.allowed_cores,
            idle_cores=self.idle_cores,
            burst=self.config.burst,
        )

    def update_rate(self) -> RateDecision:
        if not self.config.adaptive:
            rate = self.requested_rate_hz if self.requested_rate_hz is not None else self.policy.auto_steps_hz[0]
            self.decision = RateDecision(rate, "fixed rate")
        else:
            self.decision = self.policy.decide(self._rate_inputs(self.decision.rate_hz))
        return self.decision

    def set_rate(self, rate_hz: float | None) -> float | None:
        self.requested_rate_hz = check_rate(rate_hz)
        self.update_rate()
        self.next_stack_s = self.clock()
        return self.requested_rate_hz

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
            self.sweep_proc()
            self.next_proc_s = now + self.config.proc_interval_s
        if now >= self.next_board_s:
            self._read_board()
            self.next_board_s = now + self.config.board_interval_s
        if now >= self.next_nvml_s:
            self._read_nvml()
            self.next_nvml_s = now + self.config.nvml_interval_s
        if now >= self.next_sched_s and self.alive:
            self.sweep_sched()
            self.next_sched_s = now + self.config.sched_interval_s
        if now >= self.next_stack_s and self.alive:
            self._dump(first=first)
            self.next_stack_s = max(now + 1.0 / self.decision.rate_hz, self.clock())
        if now >= self.next_child_s and self.alive:
            self.sample_children()
            # A child dump costs py-spy 6-40 ms of CPU like any other: once a second in a one-off burst (doctor,
            # snapshot), five times rarer for the live sampler, whose budget is a tenth of a core.
            interval_s = self.config.child_interval_s * (1 if self.config.burst else LIVE_CHILD_FACTOR)
            self.next_child_s = self.clock() + interval_s
        return min(self.next_stack_s, self.next_proc_s, self.next_board_s, self.next_nvml_s, self.next_child_s,
                   self.next_sched_s)

    def sweep_sched(self) -> None:
        """The scheduler's view, the waits that leave the process, and (now and then) what it was started with.
        A reader that fails costs that reading only: the window keeps what the others gave (said once)."""
        try:
            sample = redacted_sample(self.sched_reader(self.pid), self.redactor.text)
            facts = None
            if self.clock() >= self.next_facts_s:
                facts = redacted_facts(self.facts_reader(self.pid), self.redactor.text)
                self.next_facts_s = self.clock() + FACTS_INTERVAL_S
        except Exception as exc:  # never lose the window to a /proc or cgroup oddity
            self._sched_errors += 1
            if self._sched_errors == 1:
                with self.lock:
                    self.warnings.append(f"scheduler readings failed: {type(exc).__name__}: {exc}")
            return
        with self.lock:
            self.window.add_sched(sample)
            if facts is not None:
                self.window.set_os_facts(facts)

    def _outside_waits(self, sweep: tuple[ProcThreadSample, ...]) -> tuple[OutsideWait, ...]:
        """With every /proc sweep (the stacks need a reading near each sample): the threads blocked on a file lock
        or a pipe another process holds, and that process (sources.peers)."""
        try:
            return self.peer_reader(sweep)
        except Exception as exc:  # a /proc oddity costs this reading only
            self._sched_errors += 1
            if self._sched_errors == 1:
                with self.lock:
                    self.warnings.append(f"reading the waits on other processes failed: {type(exc).__name__}: {exc}")
            return ()

    def _dump_peer(self, peer: int) -> StackSample | None:
        """One non-blocking dump of a process at the other end of a wait (its top frame), or None."""
        try:
            return PySpy(peer, nice=0 if self.config.burst else 10, retries=1).dump()
        except (AttachError, PySpyOutputError):
            return None

    def sample_children(self) -> None:
        """One dump of up to ``max_children`` Python children, in turn; a child that fails or exits is skipped."""
        children = self.child_lister(self.pid)
        if not children:
            return
        k = self._child_turn % len(children)
        chosen = (children[k:] + children[:k])[: self.config.max_children]
        self._child_turn += len(chosen)
        for child in chosen:
            try:
                sample = self.child_dumper(child)
            except (AttachError, PySpyOutputError):
                self._child_spies.pop(child, None)
                continue
            # A child runs the same program: its names and paths are redacted like the process's own samples.
            sample = self.redactor.stack(sample)
            with self.lock:
                self.window.add_child(sample)
        for gone in set(self._child_spies) - set(children):
            del self._child_spies[gone]

    def _dump_child(self, child: int) -> StackSample:
        spy = self._child_spies.get(child)
        if spy is None:
            spy = self._child_spies[child] = PySpy(child, nice=0 if self.config.burst else 10, retries=1)
        return spy.dump()

    def _dump(self, *, first: bool) -> None:
        self.dumps += 1
        try:
            sample = self.pyspy.dump()
        except AttachError as exc:
            if not self.check_alive():
                if first:
                    raise AttachError(f"process {self.pid} exited", ExitCode.NO_PROCESS) from None
                return  # the process ended between two dumps: not a py-spy failure
            self._count_failure(exc)
            if first:
                raise
            return
        except PySpyOutputError as exc:
            # A nonblocking dump reads memory the process is changing: a torn read is one failed sample,
            # not the end of sampling (if every dump fails, the caller sees an empty window).
            self._count_failure(exc)
            return
        # Source lines are read by the frames' real paths first; then both are redacted, keys matching.
        new_lines = read_source_lines(stack_frames((sample,)), self.lines, known=self.window.source_lines)
        sample, new_lines = self.redactor.stack(sample), self.redactor.source_lines(new_lines)
        with self.lock:
            if not sample.native:
                # py-spy's CPU cost when the source knows it (wall time also counts waiting for a busy CPU).
                cost_s = getattr(self.pyspy, "last_cpu_s", None)
                self._dump_costs.append(cost_s if isinstance(cost_s, float) else sample.duration_s)
                self._dump_walls.append(sample.duration_s)
            self.window.add_stack(sample, new_lines)
            self.update_rate()

    @property
    def dump_wall_s(self) -> float:
        """How long the next dump will probably take (the longest of the last few): 0 before the first."""
        return max(self._dump_walls, default=0.0)

    def stack_due(self) -> bool:
        return self.alive and self.clock() >= self.next_stack_s

    def _count_failure(self, exc: Exception) -> None:
        with self.lock:
            self.dump_failures += 1
            self._failure_times.append(self.clock())
            self.last_dump_error = str(exc)

    def sweep_proc(self) -> None:
        try:
            sweep = self.proc_reader(self.pid)
        except AttachError as exc:
            if exc.exit_code == ExitCode.NO_PROCESS:
                self.check_alive()
            return
        cpu = self.cpu_reader()
        resources = self.resource_reader(self.pid)
        self._last_proc = sweep
        waits = self._outside_waits(sweep)
        with self.lock:
            self.window.add_proc(sweep)
            self.window.add_outside_waits(waits)
            self.window.add_resources(resources)
            self._note_load(sweep, cpu)
            self.update_rate()
        self.check_alive()

    def _note_load(self, sweep: tuple[ProcThreadSample, ...], cpu: procfs.CpuTimes | None) -> None:
        """The target's CPU use and the idle cores over the last ~LOAD_SPAN_S (what the rate policy sees)."""
        now = self.clock()
        self._loads.append((now, sweep, cpu))
        while len(self._loads) > 2 and now - self._loads[1][0] >= LOAD_SPAN_S:
            self._loads.popleft()
        (_, old_sweep, old_cpu), (_, new_sweep, new_cpu) = self._loads[0], self._loads[-1]
        used = cores_used(old_sweep, new_sweep)
        if used is not None:
            self.target_cores = used
        if old_cpu is not None and new_cpu is not None:
            idle = procfs.idle_cores(old_cpu, new_cpu)
            if idle is not None:
                self.idle_cores = idle

    def _read_nvml(self) -> None:
        if self.nvml is None:
            self.window.gpu_na = NA("no NVML source")
            return
        result = self.nvml.sample()
        with self.lock:
            self.window.add_gpus(result)

    def _read_board(self) -> None:
        board = self.board_reader(self.pid)
        if board is None:  # say what would add one
            board = NA(f"no probe board for this process: `dflash-diag attach {self.pid}` adds the probes")
        with self.lock:
            self.window.add_board(board)

    # --- reading ---------------------------------------------------------------------------------------

    def observation(self, since_s: float | None, now_s: float) -> Observation:
        with self.lock:
            warnings = tuple(self.redactor.text(w) for w in (*self.warnings, *self._status_warnings()))
            meta = WindowMeta(self.pid, self.cmdline, self.alive, warnings)
            obs = self.window.observation(meta, since_s, now_s, self.wall())
            return replace(obs, rate_hz=self.decision.rate_hz, rate_reason=self.decision.reason)

    def _status_warnings(self) -> tuple[str, ...]:
        out = []
        if self.dump_failures:
            out.append(f"py-spy failed {self.dump_failures} of {self.dumps} dumps (last: {self.last_dump_error})")
        asked, rate = self.requested_rate_hz, self.decision.rate_hz
        if asked is not None and rate < asked:
            out.append(f"sampling backed off to {rate:.1f} Hz (asked {asked:.1f}): {self.decision.reason}")
        return tuple(out)

    def prune(self, before_s: float) -> None:
        with self.lock:
            self.window.prune(before_s, self.wall() - (self.clock() - before_s))


class _Sampler:
    """What both samplers show of their one scheduler: the process's argv and the rate it samples at, and why."""

    def __init__(self, pid: int, config: SamplerConfig, io: SamplerIO) -> None:
        self.pid = pid
        self._io = io
        self._scheduler = _Scheduler(pid, config, io)

    @property
    def cmdline(self) -> tuple[str, ...]:
        """The process's argv, redacted."""
        return self._scheduler.cmdline

    @property
    def effective_rate_hz(self) -> float:
        return self._scheduler.decision.rate_hz

    @property
    def rate_reason(self) -> str:
        return self._scheduler.decision.reason


class Collector(_Sampler):
    """Sample one process for a fixed duration (``doctor``, ``snapshot``, ``top --batch``)."""

    def __init__(self, pid: int, config: SamplerConfig | None = None, io: SamplerIO | None = None) -> None:
        super().__init__(pid, config or SamplerConfig(), io or SamplerIO())

    def collect(self, duration_s: float, progress: Progress | None = None,
                until: Callable[[], bool] | None = None) -> Observation:
        """Sample for ``duration_s`` (or until ``until()`` says so, looked at between samples); AttachError when
        the very first dump fails (with the diagnosis).

        If the process exits meanwhile, returns what was gathered with ``process_alive=False``.
        """
        sched = self._scheduler
        if not sched.check_alive():
            raise AttachError(f"no process with PID {self.pid} (it exited or never existed)", ExitCode.NO_PROCESS)
        gpm = _gpm_begin(sched.nvml)
        start = sched.clock()
        deadline = start + max(0.0, duration_s)
        first = True
        while True:
            if not first and sched.stack_due() and sched.clock() + sched.dump_wall_s > deadline:
                break  # a dump that would end past the deadline: the window ends here, on time
            due = sched.tick(first=first)
            first = first and not sched.window.stacks
            now = sched.clock()
            if progress is not None:
                progress(min(now - start, duration_s), duration_s)
            if not sched.alive or now >= deadline or (until is not None and not first and until()):
                break
            self._io.sleep(max(0.0, min(due, deadline) - now))
        if sched.alive:
            sched.sweep_proc()  # a last /proc reading so CPU % covers the whole window
            sched.sweep_sched()  # ... and a last scheduler sweep, so switches and throttling cover it too
        obs = sched.observation(start, sched.clock())
        readings = _gpm_end(sched.nvml, gpm)
        return replace(obs, gpm=readings) if readings else obs


class LiveSampler(_Sampler):
    """Continuous sampling on a daemon thread; ``poll()`` returns the last ``window_s`` as an Observation."""

    def __init__(self, pid: int, config: SamplerConfig | None = None, io: SamplerIO | None = None) -> None:
        config = config or SamplerConfig()
        super().__init__(pid, config, io or SamplerIO())
        self.window_s = config.window_s
        self._start_lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- control (any thread) --------------------------------------------------------------------------

    @property
    def rate_hz(self) -> float | None:
        """The rate asked for; None: auto."""
        return self._scheduler.requested_rate_hz

    # The setters never wait for a dump in progress (they run on the UI thread): plain attribute stores.
    def set_rate(self, rate_hz: float | None) -> float | None:
        """Ask for ``rate_hz`` (None: auto); returns the clamped request."""
        rate = self._scheduler.set_rate(rate_hz)
        self._wake.set()
        return rate

    def set_native(self, native: bool) -> bool:
        pyspy = self._scheduler.pyspy
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
        sched = self._scheduler
        with self._start_lock:
            if self._thread is None:
                if not sched.check_alive():
                    raise AttachError(f"no process with PID {self.pid} (it exited or never existed)",
                                      ExitCode.NO_PROCESS)
                sched.tick(first=True)
                self._thread = threading.Thread(target=self._run, name="dflash-diag-sampler", daemon=True)
                self._thread.start()
        # After the process exits the window freezes at the exit, so the last data stays on screen.
        exited = sched.exited_at_s
        now = exited if exited is not None else sched.clock()
        return sched.observation(now - self.window_s, now)

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=15.0)

    # --- the sampler thread ----------------------------------------------------------------------------

    def _run(self) -> None:
        sched = self._scheduler
        while not self._stop.is_set():
            try:
                due = sched.tick()
            except Exception as exc:  # never die silently: say it, slow down, keep the last data
                with sched.lock:
                    sched.warnings.append(f"sampler error: {type(exc).__name__}: {exc}")
                due = sched.clock() + 1.0
            sched.prune(sched.clock() - self.window_s - 2.0)
            if not sched.alive:
                return
            # Sleep until the next reading is due (Event.wait: no busy loop), or until set_rate/close wakes us.
            self._wake.wait(max(0.0, due - sched.clock()))
            self._wake.clear()
