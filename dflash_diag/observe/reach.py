"""Whether a target can be sampled at all, asked once before anything else is spent on it (a progress bar, an
output file, a screen): no such process, another user's, not Python, py-spy missing each fail here with their
diagnosis and exit code. A zombie passes: it has no memory to read, but /proc still says what happened to it,
and that is the diagnosis (``observe`` returns its observation without stacks)."""

from __future__ import annotations

from dataclasses import dataclass

from dflash_contract import proc
from dflash_diag.errors import AttachError, ExitCode
from dflash_diag.observe.target import Target


@dataclass(frozen=True, slots=True)
class Reach:
    pid: int  # the process checked: the target's, or a job's first rank
    zombie: bool = False  # it exited and was not reaped: only /proc can be read


def check_reachable(target: Target, *, zombie_ok: bool = False) -> Reach:
    """The target's first process can be sampled (or, with ``zombie_ok``, is a zombie: ``doctor`` diagnoses it);
    AttachError with the diagnosis and its exit code otherwise. A job's other ranks are checked as they are
    sampled: one that cannot be is a rank without stacks, named."""
    from dflash_diag.sources.pyspy import PySpy

    pid = target.pids[0]
    stat = proc.read_stat(pid) if proc.is_valid_pid(pid) else None
    if stat is not None and stat.state == "Z":
        if zombie_ok:
            return Reach(pid, zombie=True)
        raise AttachError(f"PID {pid} has exited (a zombie its parent has not reaped): nothing left to sample",
                          ExitCode.NO_PROCESS)
    if not proc.process_alive(pid):
        raise AttachError(f"no process with PID {pid} (it exited or never existed)", ExitCode.NO_PROCESS)
    PySpy(pid).check()  # no py-spy, not permitted, not Python: the diagnosis and its exit code
    return Reach(pid)


__all__ = ["Reach", "check_reachable"]
