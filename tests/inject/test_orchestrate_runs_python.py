"""Whether an attach's timeout may blame the process ("its main thread ran no Python code"): the main thread's
Python stack looked at a few times; a stack that moved is running bytecode (the queued call ran, and something in
the process stopped the bootstrap). Dumps injected here; the real path is tests/attach/test_attach_ptrace.py's."""

from __future__ import annotations

from collections.abc import Callable

from dflash_diag.errors import AttachError, ExitCode
from dflash_diag.inject.orchestrate import main_thread_runs_python
from dflash_diag.model import Frame, StackSample, ThreadSample

PID = 4242


def _dumps(*lines: int) -> Callable[[], StackSample]:
    queue = list(lines)

    def dump() -> StackSample:
        frames = (Frame("main", "/app/train.py", queue.pop(0)),)
        return StackSample(pid=PID, monotonic_s=0.0, wall_s=0.0, duration_s=0.0, native=False, threads=(
            ThreadSample(thread_id=1, os_thread_id=PID, name=None, active=True, owns_gil=True, frames=frames),))
    return dump


def test_a_main_thread_whose_stack_moves_runs_python() -> None:
    assert main_thread_runs_python(PID, dump=_dumps(84, 84, 90, 90), gap_s=0.0) == \
        "at main (train.py:84), then main (train.py:90)"


def test_the_same_stack_every_time_or_no_reading_makes_no_claim() -> None:
    assert main_thread_runs_python(PID, dump=_dumps(84, 84, 84, 84), gap_s=0.0) == ""

    def refused() -> StackSample:
        raise AttachError("py-spy could not read it", ExitCode.ATTACH_FAILED)
    assert main_thread_runs_python(PID, dump=refused, gap_s=0.0) == ""
