"""The lives of the processes an injection starts (a debugger, an interpreter, the ptrace helper) are bound to
the command's, and a process left stopped is resumed.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time
from collections.abc import Callable

from dflash_diag.inject.preflight import proc_state

PR_SET_PDEATHSIG = 1


def die_with_us() -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child receive SIGTERM when this process dies, even by SIGKILL
    (PR_SET_PDEATHSIG): gdb answers it by detaching and quitting. None where prctl cannot be called.

    The kernel sends it when the *thread* that started the child exits: the commands start it from the main
    thread and wait for it there."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def arm() -> None:
        prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:  # we died between the fork and the prctl: the signal will never come
            os._exit(1)

    return arm


def resume_if_stopped(pid: int, grace_s: float = 0.5) -> bool:
    """SIGCONT the process when a debugger left it stopped (state T); True when we had to."""
    deadline = time.monotonic() + grace_s
    while True:
        state = proc_state(pid)
        if state != "T":
            if state in ("t",) and time.monotonic() < deadline:
                time.sleep(0.02)  # the tracer is still going away
                continue
            return False
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGCONT)
        return True

