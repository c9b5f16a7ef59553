"""Host profile for long-running jobs on the lab's shared workstations.

Training jobs run for days next to interactive work; the "eco" profile lets
the kernel batch their timer wakeups (the many small polling loops of the sim
bridge, the telemetry thread) with a generous timer slack, the same knob that
systemd exposes as TimerSlackNSec= for background services.  Threads and
processes started afterwards inherit it.  "default" states the kernel's own
50 us explicitly.
"""
import ctypes
import ctypes.util

PR_SET_TIMERSLACK = 29
PR_GET_TIMERSLACK = 30
PROFILES = {"eco": 10_000_000, "default": 50_000}      # timer slack, ns

_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def apply_host_profile(name):
    slack = PROFILES[name]
    if _libc.prctl(PR_SET_TIMERSLACK, ctypes.c_ulong(slack), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_TIMERSLACK)")
    return _libc.prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0)
