"""Gather everything a bug report needs from a live, hung or dying target (a process, or every rank of a job): in
parallel, each source with its own deadline, so that one slow or failing source costs its own entry in
``missing`` and nothing else.

Sources (each a daemon thread; a stuck one is abandoned at the deadline, never joined):
- the target's window, ``observe.observe`` as every command takes it (doctor's window: stacks, /proc, NVML, the
  board, the outside evidence; every rank of a job in one window) for thread states and findings;
- of each process: one blocking ``py-spy dump --native`` (all threads with native frames; falls back to a
  non-blocking dump when the process cannot be suspended, e.g. it is SIGSTOPped); /proc: argv, environment, exe,
  cwd, threads; versions (from the process's site-packages and the driver), code hashes of the project's sources.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from dflash_contract.board import AppKeys
from dflash_diag.errors import AttachError
from dflash_diag.model import NA, Board, Maybe, Observation, ProcThreadSample, StackSample
from dflash_diag.model.job import JobObservation
from dflash_diag.observe import Target, Window, observe
from dflash_diag.observe.collect import extra_s
from dflash_diag.snapshot import environment
from dflash_diag.snapshot.environment import CodeInfo

T = TypeVar("T")

# The window is doctor's (observe.Window: 5 s by default; 1.5 s missed a hot loop that doctor's 5 s saw). Every
# source must be back this long after it: a last slow dump, then analysis and writing take ~0.2-0.5 s more. A
# native dump of a torch process that misses the deadline (py-spy resolving libtorch's symbols on a loaded machine)
# is listed as missing and the window's last Python-only dump stands in for it.
DEADLINE_MARGIN_S = 0.8
MIN_DEADLINE_S = 2.3  # a short window's sources (a native dump of a stopped process) still get the old bound


def deadline_s(window: Window) -> float:
    """When every source must be back, counted from the start."""
    return max(MIN_DEADLINE_S, window.duration_s + DEADLINE_MARGIN_S)


@dataclass
class Gathered:
    """What was gathered of one process (a job has one per rank); ``observation``: its share of the window."""

    pid: int
    started_wall_s: float
    native_stacks: StackSample | None = None
    observation: Observation | None = None
    cmdline: tuple[str, ...] = ()
    environ: Maybe[dict[str, str]] = field(default_factory=lambda: NA("not read"))
    exe: Maybe[str] = field(default_factory=lambda: NA("not read"))
    cwd: Maybe[str] = field(default_factory=lambda: NA("not read"))
    start_wall_s: float | None = None
    proc_threads: tuple[ProcThreadSample, ...] = ()
    versions: dict[str, Maybe[str]] = field(default_factory=dict)
    code: CodeInfo | None = None
    board: Board | None = None
    missing: list[tuple[str, str]] = field(default_factory=list)
    timings_s: dict[str, float] = field(default_factory=dict)
    alive_at_end: bool = True

    def miss(self, what: str, why: str) -> None:
        self.missing.append((what, why))


class _Job:
    """One source on a daemon thread: a result, an error, or still running at the deadline."""

    def __init__(self, name: str, fn: Callable[[], Any]) -> None:
        self.name = name
        self.result: Any = None
        self.error: BaseException | None = None
        self.elapsed_s: float | None = None
        self.done = threading.Event()
        self._fn = fn
        self.thread = threading.Thread(target=self._run, name=f"snapshot-{name}", daemon=True)

    def _run(self) -> None:
        t0 = time.monotonic()
        try:
            self.result = self._fn()
        except BaseException as exc:  # reported as a missing part, never raised
            self.error = exc
        finally:
            self.elapsed_s = time.monotonic() - t0
            self.done.set()


def _describe(exc: BaseException) -> str:
    if isinstance(exc, AttachError | OSError | ValueError):
        return str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {exc}"


def native_stacks(pid: int, timeout_s: float) -> tuple[StackSample, str | None]:
    """One dump with native frames; on a process that cannot be suspended, a Python-only dump and the reason."""
    from dflash_diag.sources.pyspy import PySpy  # keeps `dflash-diag --help` light
    from dflash_diag.sources.redaction import redactor_for

    redact = redactor_for(pid).stack  # as the collector's samples are: the program's names are its text
    spy = PySpy(pid, native=True, timeout_s=timeout_s, retries=2)
    try:
        return redact(spy.dump(native=True)), None
    except AttachError as exc:
        from dflash_diag.sources.procfs import process_alive

        if not process_alive(pid):
            raise
        # py-spy cannot ptrace-suspend a stopped (SIGSTOP, traced) process; it can still read its memory.
        fallback = PySpy(pid, native=False, timeout_s=timeout_s, retries=2).dump(native=False)
        return redact(fallback), f"native frames: {exc}; Python-only stacks instead"


def proc_info(pid: int) -> dict[str, Any]:
    from dflash_diag.sources import procfs

    info: dict[str, Any] = {"cmdline": procfs.read_cmdline(pid), "environ": procfs.read_environ(pid),
                            "exe": procfs.read_exe(pid)}
    try:
        info["cwd"] = os.readlink(f"/proc/{pid}/cwd")
    except OSError as exc:
        info["cwd"] = NA(f"cannot read /proc/{pid}/cwd: {exc.strerror}")
    info["start_wall_s"] = environment.process_start_wall_s(pid)
    info["threads"] = procfs.read_threads(pid)
    return info


def read_board(pid: int, board_dir: str | None = None) -> Board | None:
    from dflash_diag.sources.board import read_board as _read

    return _read(pid, board_dir)


@dataclass
class GatheredTarget:
    """Everything gathered of a target: its window (None when it could not be taken) and each process's parts, in
    the target's order (one process, or the ranks of a job)."""

    target: Target
    observation: Observation | JobObservation | None
    processes: list[Gathered]


def gather(target: Target, window: Window, *, deadline: float | None = None,
           wall_clock: Callable[[], float] = time.time) -> GatheredTarget:
    """Everything about ``target`` within ``deadline`` seconds (default :func:`deadline_s`); what could not be had
    is listed in each process's ``missing``."""
    from dflash_diag.sources.procfs import process_alive
    from dflash_diag.sources.pyspy_find import find_pyspy

    limit_s = (deadline_s(window) + extra_s(target)) if deadline is None else deadline
    find_pyspy()  # before the threads: sysconfig's first use is not thread-safe
    t0 = time.monotonic()
    sampling = _Job("collect", lambda: observe(target, window, require_stacks=False, wall_clock=wall_clock))
    sampling.thread.start()
    pids = target.pids
    if len(pids) == 1:
        processes = [gather_process(pids[0], deadline_s=limit_s, board_dir=target.board_dir, wall_clock=wall_clock)]
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=len(pids), thread_name_prefix="dflash-diag-rank") as pool:
            processes = list(pool.map(lambda pid: gather_process(pid, deadline_s=limit_s, board_dir=target.board_dir,
                                                                 wall_clock=wall_clock), pids))
    sampling.done.wait(max(0.0, limit_s - (time.monotonic() - t0)))
    observation = sampling.result if sampling.done.is_set() and sampling.error is None else None
    why = (f"timed out after {limit_s:.1f} s" if not sampling.done.is_set()
           else _describe(sampling.error) if sampling.error is not None else "")
    ranks = observation.ranks if isinstance(observation, JobObservation) else (observation,) * len(processes)
    for g, obs in zip(processes, ranks, strict=True):
        if sampling.elapsed_s is not None:
            g.timings_s["sampling window"] = round(sampling.elapsed_s, 3)
        g.alive_at_end = process_alive(g.pid)
        g.timings_s["total"] = round(time.monotonic() - t0, 3)
        if obs is None:
            g.miss("sampling window", why)
            continue
        g.observation = obs
        if g.board is None and obs.board is not None:
            g.board = obs.board
    return GatheredTarget(target=target, observation=observation, processes=processes)


def gather_process(
    pid: int,
    *,
    deadline_s: float,
    board_dir: str | None = None,
    wall_clock: Callable[[], float] = time.time,
) -> Gathered:
    """Everything about process ``pid`` but the window (``gather`` takes it for the whole target) within
    ``deadline_s``; what could not be had is listed in ``missing``."""
    out = Gathered(pid=pid, started_wall_s=wall_clock())
    t0 = time.monotonic()
    # The native dump pauses the process: give it the whole deadline minus a margin for writing.
    jobs = {
        "native stacks": _Job("native", lambda: native_stacks(pid, max(0.5, deadline_s - 0.2))),
        "process info": _Job("proc", lambda: proc_info(pid)),
        "board": _Job("board", lambda: read_board(pid, board_dir)),
    }
    for job in jobs.values():
        job.thread.start()

    proc = jobs["process info"]
    proc.done.wait(max(0.0, deadline_s - (time.monotonic() - t0)))
    if proc.done.is_set() and proc.error is None:
        info = proc.result
        out.cmdline, out.environ, out.exe, out.cwd = info["cmdline"], info["environ"], info["exe"], info["cwd"]
        out.start_wall_s, out.proc_threads = info["start_wall_s"], info["threads"]
    else:
        out.miss("process info (argv, environment, /proc threads)",
                 _describe(proc.error) if proc.error else "timed out")

    # Versions and code hashes need the argv and cwd: start them now, against the same deadline.
    cwd = out.cwd if isinstance(out.cwd, str) else None
    board_job = jobs["board"]
    board_job.done.wait(max(0.0, min(0.5, deadline_s - (time.monotonic() - t0))))
    board = board_job.result if board_job.done.is_set() and isinstance(board_job.result, Board) else None
    app_versions = board.app.get(AppKeys.VERSIONS) if board is not None and isinstance(board.app.get(AppKeys.VERSIONS), dict) else None
    later = {
        "versions": _Job("versions", lambda: environment.versions(
            pid, app_versions, board.writer.python if board else None, board.writer.torch if board else None,
            cmdline=out.cmdline)),
        "code hashes": _Job("code", lambda: environment.code_info(out.cmdline, cwd, out.start_wall_s)),
    }
    for job in later.values():
        job.thread.start()
    jobs.update(later)

    for name, job in jobs.items():
        job.done.wait(max(0.0, deadline_s - (time.monotonic() - t0)))
        if job.elapsed_s is not None:
            out.timings_s[name] = round(job.elapsed_s, 3)
        if name == "process info":
            continue
        if not job.done.is_set():
            out.miss(name, f"timed out after {deadline_s:.1f} s")
            continue
        if job.error is not None:
            out.miss(name, _describe(job.error))
            continue
        if name == "native stacks":
            out.native_stacks, note = job.result
            if note:
                out.miss("native frames", note)
        elif name == "board":
            out.board = job.result
            if job.result is None:
                out.miss("board", "no probe board for this process (not started under probes; `dflash-diag attach PID` adds them)")
        elif name == "versions":
            out.versions = job.result
        elif name == "code hashes":
            out.code = job.result
    out.timings_s["total"] = round(time.monotonic() - t0, 3)
    return out
