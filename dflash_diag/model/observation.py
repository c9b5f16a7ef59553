"""Everything gathered about one process over one window: the input of every analysis.

An observation is plain data: every raw reading the analysis reads (stacks with their frames, /proc and NVML
series, the boards, stderr, source lines and file facts, the children's stacks, a kernel trace), plus what the
analysis is asked to judge it with (the stage patterns, the wall-clock time it takes as "now"). So
``analyse(observation)`` is a pure function of it, and an observation written to JSON (``observe.codec``) and read
back is judged the same way, on any machine, at any later time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from dflash_diag.model.board import Board
from dflash_diag.model.common import Maybe
from dflash_diag.model.evidence import ProcessFacts, SourceFile, SourceLine
from dflash_diag.model.gpu import GpmReading, GpuSample
from dflash_diag.model.kernels import KernelTrace, KernelWindow
from dflash_diag.model.patterns import StagePatterns
from dflash_diag.model.proc import ProcessSample, ProcThreadSample
from dflash_diag.model.sched import EnvRead, OsFacts, OutsideWait, SchedSample
from dflash_diag.model.stacks import NativeProfile, PeerNative, StackSample


@dataclass(frozen=True, slots=True)
class Observation:
    pid: int
    cmdline: tuple[str, ...]  # redacted
    started_wall_s: float
    window_s: float
    stacks: tuple[StackSample, ...]
    proc: tuple[tuple[ProcThreadSample, ...], ...]  # one tuple per /proc sweep, oldest first
    gpus: Maybe[tuple[tuple[GpuSample, ...], ...]]  # one tuple per NVML sweep, oldest first
    boards: Maybe[tuple[Board, ...]]  # distinct board versions seen in the window, oldest first
    process_alive: bool
    warnings: tuple[str, ...]
    # Source text of the innermost Python frames' lines, keyed "filename:line", read by the collector when the
    # stacks were taken (C calls such as ``.item()`` or ``time.sleep`` leave no frame; their line shows them).
    source_lines: Mapping[str, str] = field(default_factory=dict)
    # Evidence from outside the stacks (``sources.outside``): the process's run state, start time and stderr,
    # and what the files on disk say about the sampled frames. None / empty when not gathered.
    process: ProcessFacts | None = None
    code: tuple[SourceLine, ...] = ()
    files: tuple[SourceFile, ...] = ()
    # Whole-process readings (RSS, threads, open fds), one per /proc sweep, oldest first: resource trends.
    resources: tuple[ProcessSample, ...] = ()
    # Stack samples of the process's Python children (workers), oldest first; ``StackSample.pid`` says whose.
    children: tuple[StackSample, ...] = ()
    # A torch.profiler trace of the process, when one was taken (`record --kernels`, `doctor --kernels-trace`).
    kernels: KernelTrace | None = None
    # ``doctor --kernel-window``: what the recording in the process was and cost it (None: no kernel window taken).
    kernel_window: KernelWindow | None = None
    # The operating system's view (``sources.sched``): one scheduler sweep about a second, oldest first; what the
    # process may use and was started with (read once); its threads' waits that end in another process
    # (``sources.peers``: a file lock's holder, a pipe's other end), one per sweep that saw them.
    sched: tuple[SchedSample, ...] = ()
    os_facts: OsFacts | None = None
    outside_waits: tuple[OutsideWait, ...] = ()
    # NVML GPM over the window, one reading per GPU (Hopper and newer; fields NA with the reason elsewhere): the
    # share of the window the SMs, the tensor cores and the FP32 pipes were busy. Device-wide readings: they are
    # this process's only while no other process runs on that GPU (``analysis.findings.precision``).
    gpm: tuple[GpmReading, ...] = ()
    # Native (C/C++) stacks beside the window (``sources.native_profile``, doctor's default for one process): where a
    # thread's time goes below its Python frames. None: not taken.
    native: NativeProfile | None = None
    # With the native look: the native profiles of busy processes its threads wait on whose CPU goes largely to the
    # kernel (``observe.native_look``), by PID: which C calls enter it.
    peer_native: tuple[PeerNative, ...] = ()
    # With the process's own native look: the variables of its environment that decide what its C library calls do
    # (``TZ``), those it has, redacted (``analysis.libc``: a name absent was not set).
    native_env: tuple[tuple[str, str], ...] = ()
    # With the native look: the environment variables set in the process that the installed code its threads run
    # names (``sources.env_reads``): a setting read where the time goes.
    env_reads: tuple[EnvRead, ...] = ()
    # What the analysis judges the window with: the thread-name patterns of the stages, and the wall-clock time it
    # takes as "now" (the age of a board, of the process, of a stderr line). None: the window's end.
    patterns: StagePatterns = field(default_factory=StagePatterns)
    now_wall_s: float | None = None
    # The stack rate in force at the end of the window, and why (shown by ``top``; not read by the analysis).
    rate_hz: float | None = None
    rate_reason: str = ""

    def line_text(self, filename: str, line: int) -> str | None:
        """The recorded source text of ``filename:line``, or None (a :data:`LineLookup` for classification)."""
        return self.source_lines.get(f"{filename}:{line}")

    @property
    def judged_at_wall_s(self) -> float:
        """The wall-clock time the analysis takes as "now": recorded with the observation, else the window's end."""
        return self.now_wall_s if self.now_wall_s is not None else self.started_wall_s + self.window_s

    @property
    def board(self) -> Board | None:
        """The newest board, if any."""
        if isinstance(self.boards, tuple) and self.boards:
            return self.boards[-1]
        return None
