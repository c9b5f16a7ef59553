"""One injection in flight (what it knows, what it measured) and what it returns; the time rules every method
follows.

``timeout_s`` bounds every wait: each step gets what is left of it. Two waits may go past it, each by a grace,
because cutting them short would hurt the process: a call into the process in flight at the deadline
(``CALL_GRACE_S``), and a bootstrap that already claimed the request (``CLAIMED_GRACE_S``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dflash_diag.inject.preflight import Target
from dflash_diag.inject.request import Request

DEFAULT_TIMEOUT_S = 30.0
CALL_GRACE_S = 10.0  # a call into the process in flight at the deadline: killing the debugger then kills the process
CLAIMED_GRACE_S = 10.0  # the bootstrap claimed the request: it runs, its answer is a moment away
FINISH_S = 1.0  # the least a debugger gets to detach and quit before it is killed (between commands)


@dataclass(frozen=True)
class Outcome:
    """What one attach/detach/inventory did (``result`` is the bootstrap's own answer)."""

    pid: int
    action: str
    method: str
    debugger: str | None
    python: str
    stopped_s: float | None  # how long the injector held the process (ptrace: the one thread it used) stopped
    waited_s: float  # from queueing the call to the answer
    total_s: float
    nudged: bool
    result: Mapping[str, Any]
    transcript: tuple[str, ...] = ()
    # The pause: the longest time one thread of the process could not run its own code (from the first stop
    # to the last resume of that thread), and how many threads were stopped (debuggers: all; ptrace: one, or
    # a few for some microseconds while it looks for a thread at a safe place; remote-exec: none).
    paused_s: float | None = None
    threads_paused: int | None = None
    stops: int | None = None  # how many times a thread was stopped (ptrace may stop and let go before it calls)
    paused_total_s: float | None = None  # all the stops added up


@dataclass
class Run:
    target: Target
    req: Request
    method: str
    path: str
    timeout_s: float
    deadline_mono: float = float("inf")
    transcript: list[str] = field(default_factory=list)
    stopped_s: float | None = None
    paused_s: float | None = None
    threads_paused: int | None = None
    stops: int | None = None  # how many times a thread was stopped (ptrace may stop and let go before it calls)
    paused_total_s: float | None = None  # all the stops added up
    nudged: bool = False
    python_version: str | None = None
    main_thread_where: str | None = None


def left_s(run: Run) -> float:
    """What the --timeout leaves (at least FINISH_S: enough for a debugger to detach and quit)."""
    return max(FINISH_S, run.deadline_mono - time.monotonic())


def last_line(out: str) -> str:
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    return lines[-1][:200] if lines else "no output"

