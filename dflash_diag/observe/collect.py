"""Observe a target for one window: the one path every command takes (``doctor``, ``top --batch``, ``snapshot``,
``record``).

Sampling (``sources.collect``: py-spy stacks, /proc, NVML, the board, the children's stacks) and the outside
evidence (``sources.outside``: /proc state, stderr, the source files), for one process or for every rank of a job
in one window (``sources.jobcollect``). What comes back is plain data (``model.Observation``, or a
``model.job.JobObservation`` holding one per rank) that records what it is to be judged with (the stage patterns,
the time taken as "now"): ``analysis.analyse`` of it is the diagnosis, live or replayed from a file.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from dflash_diag.errors import AttachError, ExitCode
from dflash_diag.model import NA, Observation
from dflash_diag.model.job import JobObservation, JobTopology
from dflash_diag.observe.reach import check_reachable
from dflash_diag.observe.target import Target
from dflash_diag.observe.window import Window

Progress = Callable[[float, float], None]  # (elapsed_s, total_s)
# States in which a process cannot run: a window without stacks of it is its diagnosis, not a failure.
_CANNOT_RUN = ("Z", "T", "t", "D")


def observe(target: Target, window: Window, progress: Progress | None = None, *, zombie_ok: bool = False,
            require_stacks: bool = True, until: Callable[[], bool] | None = None,
            finish: Callable[[Observation], Observation] | None = None,
            wall_clock: Callable[[], float] = time.time) -> Observation | JobObservation:
    """Sample ``target`` for ``window`` and add the outside evidence.

    ``progress(elapsed_s, total_s)`` is called as the window goes. With ``require_stacks``, AttachError(NO_PROCESS)
    when not one stack sample could be taken of a process that could run (of any rank of a job); ``top --batch``
    reports such a window as it is. ``zombie_ok``: a zombie is observed from /proc alone (``doctor``). ``until``: the
    window ends early once it says so; ``finish``: adds evidence gathered beside the window (``record --kernels``'
    trace). The observation records ``wall_clock()`` at its end as the analysis' "now"."""
    reach = check_reachable(target, zombie_ok=zombie_ok)
    if target.job is not None:
        return _observe_job(target, window, progress, require_stacks=require_stacks, wall_clock=wall_clock)
    if reach.zombie:
        return zombie_observation(target, wall_clock())
    from dflash_diag.sources.collect import Collector
    from dflash_diag.sources.outside import OutsideReader

    collector = Collector(target.pid, window.sampler_config(target.board_dir))
    obs = OutsideReader(target.pid).enrich(collector.collect(window.duration_s, progress=progress, until=until))
    if finish is not None:
        obs = finish(obs)
    if require_stacks and not obs.stacks and (obs.process is None or obs.process.state not in _CANNOT_RUN):
        raise AttachError(f"no stack sample of PID {target.pid} could be taken in {window.duration_s:g} s "
                          f"({'; '.join(obs.warnings) or 'the process exited'})", ExitCode.NO_PROCESS)
    return replace(obs, patterns=target.patterns, now_wall_s=wall_clock())


def _observe_job(target: Target, window: Window, progress: Progress | None, *, require_stacks: bool,
                 wall_clock: Callable[[], float]) -> JobObservation:
    """Every rank for one window, each with its outside evidence."""
    from dflash_diag.sources.jobcollect import JobCollector
    from dflash_diag.sources.outside import OutsideReader

    topology = target.job
    assert topology is not None
    collector = JobCollector(topology, window.sampler_config(target.board_dir),
                             enrich=lambda pid, obs: OutsideReader(pid).enrich(obs))
    opening = _MailboxOpening(topology) if _reads_mailbox(topology) else None
    job = collector.collect(window.duration_s, progress=progress)
    now = wall_clock()  # the window's end: the mailbox's gathering after it must not age what the window read
    if opening is not None:
        job = replace(job, mailbox=opening.finish())
    if require_stacks and not any(o.stacks for o in job.ranks):
        reasons = "; ".join(w for o in job.ranks for w in o.warnings)[:400]
        raise AttachError(f"no stack sample of any of the {len(topology.ranks)} rank(s) could be taken in "
                          f"{window.duration_s:g} s ({reasons or 'they exited'})", ExitCode.NO_PROCESS)
    ranks = tuple(replace(o, patterns=target.patterns, now_wall_s=now) for o in job.ranks)
    return replace(job, ranks=ranks, now_wall_s=now)


# Reading a job's mailbox adds to the window: joining the store (torch's client: importing torch, then a connect
# bounded by StoreConfig.connect_timeout_s) and the end's gathering (MailboxWatch's deadline_s).
MAILBOX_JOIN_WAIT_S = 15.0  # importing torch on a loaded machine; ~2 s on a quiet one (then no wait at all)
MAILBOX_EXTRA_S = MAILBOX_JOIN_WAIT_S + 2.5 + 1.0


def _reads_mailbox(topology: JobTopology | None) -> bool:
    world = topology.world_size if topology is not None else None
    return topology is not None and bool(topology.ranks) and world is not None and world > len(topology.ranks)


def extra_s(target: Target) -> float:
    """How much longer than its window observing ``target`` may take (a job's mailbox, when it is read)."""
    return MAILBOX_EXTRA_S if _reads_mailbox(target.job) else 0.0


class _MailboxOpening:
    """The job's mailbox (``sources.store.MailboxWatch``), joined and first read beside the window: joining imports
    torch's store client (seconds on a loaded machine), which must not delay or stretch the ranks' window. The
    window's end waits for it at most ``MAILBOX_JOIN_WAIT_S`` more, then reads the end."""

    def __init__(self, topology: JobTopology) -> None:
        self._pid = topology.launcher_pid or topology.ranks[0].pid
        self._watch: Any = None
        self._why = ""
        self._thread = threading.Thread(target=self._open, name="dflash-diag-mailbox", daemon=True)
        self._thread.start()

    def _open(self) -> None:
        from dflash_diag.sources.store import MailboxWatch, open_mailbox

        try:
            box = open_mailbox(self._pid)
            if isinstance(box, NA):
                self._why = box.reason
                return
            watch = MailboxWatch(box)
            watch.begin()
            self._watch = watch
        except Exception as exc:  # whatever the store client raises is a reason, not a failure
            self._why = f"joining the job's store failed: {type(exc).__name__}: {exc}"[:300]

    def finish(self) -> Any:
        """The window's reading of the mailbox (``model.mailbox.MailboxWindow``), or why there is none."""
        self._thread.join(MAILBOX_JOIN_WAIT_S)
        if self._thread.is_alive():
            return f"joining the job's store took longer than the window and {MAILBOX_JOIN_WAIT_S:g} s more"
        if self._watch is None:
            return self._why or "the job's store could not be joined"
        return self._watch.end()


def zombie_observation(target: Target, now_wall_s: float) -> Observation:
    """A zombie has no memory to read: /proc still says what happened, and that is the diagnosis."""
    from dflash_diag.sources.outside import OutsideReader

    pid = target.pid
    empty = Observation(pid=pid, cmdline=(), started_wall_s=now_wall_s, window_s=0.0, stacks=(), proc=(),
                        gpus=NA("not sampled: the process is a zombie"),
                        boards=NA("not read: the process is a zombie"), process_alive=False,
                        warnings=(f"not sampled: PID {pid} is a zombie",), patterns=target.patterns,
                        now_wall_s=now_wall_s)
    return OutsideReader(pid).enrich(empty)


__all__ = ["MAILBOX_EXTRA_S", "Progress", "extra_s", "observe", "zombie_observation"]
