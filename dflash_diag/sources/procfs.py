"""Per-thread and per-process readings from /proc (Linux). Everything read is validated; vanished threads skip.

Costs (probe-apis.md §4.2f): stat + schedstat for one thread is ~40-80 µs, so a sweep of a 100-thread trainer
is a few ms: cheap enough at 1-2 Hz, never needs ptrace.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path

from dflash_diag.errors import AttachError, ExitCode
from dflash_diag.model import NA, Maybe, ProcThreadSample
from dflash_diag.model.text import printable

PROC = Path("/proc")
MAX_CMDLINE_BYTES = 1024 * 1024
MAX_ENVIRON_BYTES = 4 * 1024 * 1024
_STATES = set("RSDZTtWXxKPI")
_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class ProcParseError(ValueError):
    """A /proc file did not have the layout the kernel documents."""


def parse_stat(text: str) -> tuple[str, str, int, int, int]:
    """(comm, state, utime_ticks, stime_ticks, starttime_ticks) from a /proc/.../stat line.

    comm is in parentheses and may itself contain spaces and ')' : split on the LAST ')'.
    """
    open_idx = text.find("(")
    close_idx = text.rfind(")")
    if open_idx < 0 or close_idx < open_idx:
        raise ProcParseError("stat: no (comm)")
    comm = text[open_idx + 1 : close_idx]
    rest = text[close_idx + 1 :].split()
    # rest[0] is field 3 (state); utime/stime are fields 14/15; starttime is field 22.
    if len(rest) < 20:
        raise ProcParseError(f"stat: {len(rest) + 2} fields, expected at least 22")
    state = rest[0]
    if len(state) != 1 or state not in _STATES:
        raise ProcParseError(f"stat: bad state {state!r}")
    try:
        utime, stime, start = int(rest[11]), int(rest[12]), int(rest[19])
    except ValueError:
        raise ProcParseError("stat: non-integer time field") from None
    if min(utime, stime, start) < 0:
        raise ProcParseError("stat: negative time field")
    return comm, state, utime, stime, start


def parse_schedstat(text: str) -> tuple[int, int]:
    """(on-CPU ns, run-queue wait ns) from /proc/.../schedstat."""
    parts = text.split()
    if len(parts) < 2:
        raise ProcParseError("schedstat: expected 3 fields")
    try:
        run_ns, wait_ns = int(parts[0]), int(parts[1])
    except ValueError:
        raise ProcParseError("schedstat: non-integer field") from None
    if run_ns < 0 or wait_ns < 0:
        raise ProcParseError("schedstat: negative field")
    return run_ns, wait_ns


def _read(path: Path, limit: int = 65536) -> str:
    with open(path, "rb") as fh:
        return fh.read(limit).decode("utf-8", errors="replace")


def _no_process(pid: int) -> AttachError:
    return AttachError(f"no process with PID {pid} (it exited or never existed)", ExitCode.NO_PROCESS)


def read_thread(pid: int, tid: int, *, clock: Callable[[], float] = time.monotonic) -> ProcThreadSample | None:
    """One thread's readings, or None when it vanished (or its files are unreadable/malformed) meanwhile."""
    base = PROC / str(pid) / "task" / str(tid)
    try:
        comm_stat, state, utime, stime, _ = parse_stat(_read(base / "stat"))
        try:
            comm = _read(base / "comm", 256).rstrip("\n")
        except OSError:
            comm = comm_stat
        try:
            run_ns, wait_ns = parse_schedstat(_read(base / "schedstat"))
        except (OSError, ProcParseError):
            # Kernels without CONFIG_SCHEDSTATS: fall back to tick-granular utime+stime.
            run_ns, wait_ns = (utime + stime) * 1_000_000_000 // _CLK_TCK, 0
    except (OSError, ProcParseError):
        return None
    return ProcThreadSample(
        tid=tid,
        comm=printable(comm),  # the program names its threads (prctl): it could name one "\x1b[2J"
        state=state,
        utime_s=utime / _CLK_TCK,
        stime_s=stime / _CLK_TCK,
        run_ns=run_ns,
        runq_wait_ns=wait_ns,
        monotonic_s=clock(),
    )


def thread_ids(pid: int) -> tuple[int, ...]:
    try:
        names = os.listdir(PROC / str(pid) / "task")
    except FileNotFoundError:
        raise _no_process(pid) from None
    except PermissionError:
        raise AttachError(f"not allowed to read /proc/{pid}/task", ExitCode.PERMISSION) from None
    return tuple(sorted(int(n) for n in names if n.isdigit()))


def read_threads(pid: int, *, clock: Callable[[], float] = time.monotonic) -> tuple[ProcThreadSample, ...]:
    """Every thread of ``pid`` (threads that exit during the sweep are skipped). AttachError if pid is gone."""
    out = []
    for tid in thread_ids(pid):
        sample = read_thread(pid, tid, clock=clock)
        if sample is not None:
            out.append(sample)
    return tuple(out)


def process_start_ticks(pid: int) -> int:
    """Field 22 of /proc/<pid>/stat: with the PID, identifies one process even after PID reuse."""
    try:
        return parse_stat(_read(PROC / str(pid) / "stat"))[4]
    except FileNotFoundError:
        raise _no_process(pid) from None
    except ProcParseError as exc:
        raise AttachError(f"/proc/{pid}/stat is malformed: {exc}", ExitCode.FAILURE) from None


def process_cpu_s(pid: int) -> float:
    """utime + stime of the whole process, in seconds (for the sampler's back-off)."""
    try:
        _, _, utime, stime, _ = parse_stat(_read(PROC / str(pid) / "stat"))
    except FileNotFoundError:
        raise _no_process(pid) from None
    except ProcParseError as exc:
        raise AttachError(f"/proc/{pid}/stat is malformed: {exc}", ExitCode.FAILURE) from None
    return (utime + stime) / _CLK_TCK


def read_cmdline(pid: int) -> tuple[str, ...]:
    """argv of the process (NOT redacted: redaction is the snapshot's job). Empty for kernel threads."""
    try:
        with open(PROC / str(pid) / "cmdline", "rb") as fh:
            raw = fh.read(MAX_CMDLINE_BYTES)
    except FileNotFoundError:
        raise _no_process(pid) from None
    parts = raw.split(b"\0")
    if parts and parts[-1] == b"":
        parts = parts[:-1]
    return tuple(p.decode("utf-8", errors="replace") for p in parts)


_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")


def read_environ(pid: int) -> Maybe[dict[str, str]]:
    """The process's initial environment (NOT redacted), or NA when we may not read it (other user)."""
    try:
        with open(PROC / str(pid) / "environ", "rb") as fh:
            raw = fh.read(MAX_ENVIRON_BYTES)
    except FileNotFoundError:
        raise _no_process(pid) from None
    except PermissionError:
        return NA(f"not allowed to read /proc/{pid}/environ (another user's process?)")
    env: dict[str, str] = {}
    for item in raw.split(b"\0"):
        if not item or b"=" not in item:
            continue
        key, _, value = item.decode("utf-8", errors="replace").partition("=")
        if _ENV_KEY.match(key):
            env[key] = value
    return env


def read_exe(pid: int) -> Maybe[str]:
    try:
        return os.readlink(PROC / str(pid) / "exe")
    except FileNotFoundError:
        raise _no_process(pid) from None
    except OSError as exc:
        return NA(f"cannot read /proc/{pid}/exe: {exc.strerror}")


def process_alive(pid: int, start_ticks: int | None = None) -> bool:
    """True while ``pid`` runs (and, given ``start_ticks``, is still the same process, not a reused PID)."""
    try:
        stat = _read(PROC / str(pid) / "stat")
        _, state, _, _, start = parse_stat(stat)
    except (OSError, ProcParseError):
        return False
    if state in ("Z", "X", "x"):
        return False
    return start_ticks is None or start == start_ticks
