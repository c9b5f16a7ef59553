"""Whether to wake a main thread parked in a Python lock wait with a spurious EINTR (docs/attach.md, section 5).

A pending call runs at the main thread's next eval-loop check; a main thread parked in ``join()``,
``Queue.get()`` or ``Event.wait()`` never comes back to one. Python's lock wait answers an EINTR by running
pending calls and waiting again, so the injector sets the interrupted futex wait's result to EINTR: exactly what a
signal would do. Only there: a futex wait under a Python lock acquire, interrupted in a restartable state.
"""

from __future__ import annotations

from collections.abc import Sequence

# The C functions a main thread parked in a Python-level lock wait sits under (3.11/3.12; 3.13+).
LOCK_WAIT_FUNCS = frozenset({"PyThread_acquire_lock_timed", "_PyMutex_LockTimed", "_PySemaphore_Wait",
                              "_PyParkingLot_Park", "PyMutex_Lock"})
RESTART_ERRNOS = frozenset({-512, -513, -514, -516})  # ERESTARTSYS, ERESTARTNOINTR, ERESTARTNOHAND, ERESTART_RESTARTBLOCK
FUTEX_X86_64 = 202
EINTR = -4


def should_nudge(orig_rax: int | None, rax: int | None, functions: Sequence[str], machine: str) -> bool:
    """Wake the main thread with EINTR only where Python itself handles it: a futex wait under a Python
    lock acquire (``join()``, ``Queue.get()``...), interrupted by our attach in a restartable state."""
    if machine not in ("x86_64", "AMD64") or orig_rax != FUTEX_X86_64 or rax not in RESTART_ERRNOS:
        return False
    return any(f in LOCK_WAIT_FUNCS for f in functions[:16])

