"""How a process is identified and whether it is alive, from /proc (Linux), for probes and tool alike.

A PID alone does not identify a process: PIDs are reused. (PID, start time in clock ticks since boot,
field 22 of ``/proc/PID/stat``) does; every board carries it, and every "is it still the same process"
question is answered here.
"""

from __future__ import annotations

import os
from typing import NamedTuple

PID_MAX = 4_194_304  # the largest pid_max Linux allows (2**22): a larger number is never a PID
CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_STATES = frozenset("RSDZTtWXxKPI")


class Stat(NamedTuple):
    """The fields of ``/proc/PID/stat`` (or ``/proc/PID/task/TID/stat``) that dflash-diag reads."""

    comm: str
    state: str  # R running, S sleeping, D uninterruptible, T stopped, t traced, Z zombie, X dead, I idle
    ppid: int
    utime_ticks: int
    stime_ticks: int
    start_time_ticks: int  # field 22
    # How the scheduler weighs it (fields 19 and 41): nice -20..19 (0 by default; higher gets a smaller share of a
    # contended CPU: at 19 about 1/70th of a nice-0 thread's), and the policy (0 SCHED_OTHER, 1 FIFO, 2 RR,
    # 3 BATCH, 5 IDLE). None where the line is shorter (very old kernels).
    nice: int | None = None
    policy: int | None = None
    # Page faults so far (fields 10 and 12): minor (memory first touched, or mapped without I/O) and major (read
    # from disk or swap). None where not readable.
    minflt: int | None = None
    majflt: int | None = None
    session: int | None = None  # field 6: the session ID (setsid starts a new one)


def is_valid_pid(pid: object) -> bool:
    """True for an int a Linux PID can be (1 .. 2**22); bools, zero, negatives and huge numbers are not."""
    return isinstance(pid, int) and not isinstance(pid, bool) and 0 < pid <= PID_MAX


def parse_stat(text: str) -> Stat:
    """Parse a stat line; ValueError (with what is wrong) on anything malformed.

    comm (field 2) is in parentheses and may itself hold spaces and ``)``: split after the LAST ``)``.
    """
    open_idx = text.find("(")
    close_idx = text.rfind(")")
    if open_idx < 0 or close_idx < open_idx:
        raise ValueError("stat: no (comm)")
    rest = text[close_idx + 1 :].split()
    # rest[0] is field 3 (state), rest[1] field 4 (ppid), utime/stime fields 14/15, starttime field 22.
    if len(rest) < 20:
        raise ValueError(f"stat: {len(rest) + 2} fields, expected at least 22")
    state = rest[0]
    if len(state) != 1 or state not in _STATES:
        raise ValueError(f"stat: bad state {state[:8]!r}")
    try:
        ppid, utime, stime, start = int(rest[1]), int(rest[11]), int(rest[12]), int(rest[19])
    except ValueError:
        raise ValueError("stat: non-integer field") from None
    if min(ppid, utime, stime, start) < 0:
        raise ValueError("stat: negative field")
    nice = _int_field(rest, 16, -20, 19)
    policy = _int_field(rest, 38, 0, 7)
    minflt, majflt = _int_field(rest, 7, 0, 2**63), _int_field(rest, 9, 0, 2**63)
    session = _int_field(rest, 3, 0, PID_MAX)
    return Stat(text[open_idx + 1 : close_idx], state, ppid, utime, stime, start, nice, policy, minflt, majflt,
                session)


def _int_field(rest: list[str], index: int, low: int, high: int) -> int | None:
    """An optional integer field in its kernel-documented range, else None (a reading, never an error)."""
    try:
        value = int(rest[index])
    except (IndexError, ValueError):
        return None
    return value if low <= value <= high else None


def _stat_text(pid: int | str, tid: int | None = None) -> str:
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    with open(path, "rb") as fh:
        return fh.read(4096).decode("utf-8", "replace")


def read_stat(pid: int | str = "self", tid: int | None = None) -> Stat | None:
    """The stat of a process (or one of its threads), or None when it does not exist or cannot be read."""
    if pid != "self" and not is_valid_pid(pid):
        return None
    try:
        return parse_stat(_stat_text(pid, tid))
    except (OSError, ValueError):
        return None


def start_time_ticks(pid: int | str = "self") -> int | None:
    """Field 22 of ``/proc/PID/stat``: when the process started, in clock ticks since boot; None if gone."""
    stat = read_stat(pid)
    return stat.start_time_ticks if stat is not None else None


def boot_time_s() -> float | None:
    try:
        with open("/proc/stat", "rb") as fh:
            return float(next(int(line.split()[1]) for line in fh if line.startswith(b"btime ")))
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def start_wall_s(pid: int | str = "self") -> float | None:
    """When the process started, as a wall-clock time (boot time + start ticks), or None."""
    ticks = start_time_ticks(pid)
    boot = boot_time_s()
    return None if ticks is None or boot is None else boot + ticks / CLOCK_TICKS_PER_S


def process_alive(pid: int, start_ticks: int | None = None) -> bool:
    """True while ``pid`` runs (a zombie has exited) and, given ``start_ticks``, is the same process.

    The one liveness check of probes and tool alike. Works for other users' processes (/proc/PID/stat is
    world-readable); where /proc hides them (hidepid), asks the kernel with signal 0 instead."""
    if not is_valid_pid(pid):
        return False  # os.kill(0 or -n, 0) would name a process group; a huge number overflows
    try:
        stat = parse_stat(_stat_text(pid))
    except FileNotFoundError:
        return False
    except (OSError, ValueError):
        return _signalable(pid)  # cannot tell the start time: alive is the best answer there is
    if stat.state in ("Z", "X", "x"):
        return False
    return start_ticks is None or stat.start_time_ticks == start_ticks


def _signalable(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def owner_uid(pid: int) -> int | None:
    """The real user id a process runs as, or None when it is gone."""
    if not is_valid_pid(pid):
        return None
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None
