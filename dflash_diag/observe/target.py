"""What is looked at: one process, or a job of ranks (a launcher and the ranks it started, docs/jobs.md), resolved
once from the PID the user named, with where its boards are and which thread names make its stages.

A PID is taken as a job when it is a launcher with rank children (torchrun's own PID, or ``dflash-diag run``'s
in front of it) or a rank with peers under one launcher; ``--job`` insists (a PID that is neither is a usage
error), ``--no-job`` looks at the one process only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from dflash_diag.errors import AttachError, CommandError, ExitCode
from dflash_diag.model.job import ASKED_PROCESS, JobTopology
from dflash_diag.model.patterns import StagePatterns

LAUNCH_WAIT_S = 60.0  # a launcher a command just started: how long its ranks may take to appear


@dataclass(frozen=True, slots=True)
class Target:
    """One process (``job`` None) or every rank of a job; ``pid`` is the PID the user named."""

    pid: int
    job: JobTopology | None = None
    board_dir: str | None = None
    patterns: StagePatterns = field(default_factory=StagePatterns)

    @property
    def pids(self) -> tuple[int, ...]:
        """The processes sampled: the ranks of a job, in order; else the one process."""
        return tuple(r.pid for r in self.job.ranks) if self.job is not None else (self.pid,)

    @property
    def label(self) -> str:
        if self.job is None:
            return f"PID {self.pid}"
        return f"the job of PID {self.job.launcher_pid or self.job.asked_pid} ({len(self.job.ranks)} rank(s))"


def job_topology(pid: int, wanted: bool | None) -> JobTopology | None:
    """The job to look at, or None for one process. ``wanted``: the ``--job`` flag (None: decide from the tree)."""
    if wanted is False:
        return None
    from dflash_diag.sources.job import find_job

    topology = find_job(pid)
    if topology is None or not topology.ranks:
        if wanted:
            raise CommandError(f"PID {pid} is neither a rank (no RANK or LOCAL_RANK in its environment) nor the "
                               "launcher of ranks (none among its children): leave out --job to look at it alone",
                               ExitCode.USAGE)
        return None
    if not wanted and topology.asked == ASKED_PROCESS and len(topology.ranks) == 1:
        return None  # a process that merely has RANK set: one process, as it always was
    return topology


def _launched_job(pid: int, wanted: bool | None, wait_s: float) -> JobTopology | None:
    """The job of a launcher a command just started: its ranks get ``wait_s`` to appear (docs/jobs.md)."""
    from dflash_diag.sources.job import is_launcher_argv
    from dflash_diag.sources.procfs import read_cmdline

    if wanted is False:
        return None
    topology = job_topology(pid, None)
    if topology is None:
        try:
            launcher = is_launcher_argv(read_cmdline(pid))
        except AttachError:
            launcher = False
        deadline = time.monotonic() + wait_s
        while launcher and topology is None and time.monotonic() < deadline:
            time.sleep(0.5)
            topology = job_topology(pid, None)
    if topology is None and wanted:
        return job_topology(pid, True)  # a usage error that says what the PID is not
    return topology


def resolve_target(pid: int, job: bool | None = None, *, board_dir: str | None = None,
                   patterns: StagePatterns | None = None, launched: bool = False,
                   launch_wait_s: float = LAUNCH_WAIT_S) -> Target:
    """The target ``pid`` names: a job when it launches or belongs to one (``job``: the ``--job`` flag, None to
    decide from the process tree), else the one process. ``launched``: a command this tool just started, whose
    ranks may not exist yet."""
    if pid <= 0:
        raise CommandError(f"PID must be a positive integer, got {pid}", ExitCode.USAGE)
    topology = _launched_job(pid, job, launch_wait_s) if launched else job_topology(pid, job)
    return Target(pid=pid, job=topology, board_dir=board_dir, patterns=patterns or StagePatterns())


__all__ = ["LAUNCH_WAIT_S", "Target", "job_topology", "resolve_target"]
