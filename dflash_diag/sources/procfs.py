"""Per-thread and per-process readings from /proc (Linux). Everything read is validated; vanished threads skip.

Costs: stat + schedstat + wchan + syscall for one thread is ~50-100 µs, so a sweep of a 100-thread trainer is a
few ms: cheap enough at 2 Hz, never needs ptrace. ``wchan`` (where the kernel has a sleeping thread blocked) and
``syscall`` (the blocking system call) tell a thread parked in a socket read or a futex from one that computes;
``syscall`` needs the same permission as ptrace and is left out (None) where it is refused.
"""

from __future__ import annotations

import os
import platform
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from dflash_contract import proc
from dflash_diag.errors import AttachError, ExitCode
from dflash_diag.model import NA, Maybe, ProcessSample, ProcThreadSample
from dflash_diag.model.text import printable

PROC = Path("/proc")
MAX_CMDLINE_BYTES = 1024 * 1024
MAX_ENVIRON_BYTES = 4 * 1024 * 1024
_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class ProcParseError(ValueError):
    """A /proc file did not have the layout the kernel documents."""


def parse_stat(text: str) -> tuple[str, str, int, int, int]:
    """(comm, state, utime_ticks, stime_ticks, starttime_ticks) from a /proc/.../stat line (the contract's parser)."""
    st = parse_stat_fields(text)
    return st.comm, st.state, st.utime_ticks, st.stime_ticks, st.start_time_ticks


def parse_stat_fields(text: str) -> proc.Stat:
    """Every field dflash-diag reads from a stat line (nice and policy too); ProcParseError when malformed."""
    try:
        return proc.parse_stat(text)
    except ValueError as exc:
        raise ProcParseError(str(exc)) from None


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


# System calls a thread can sleep in, by number, for the architectures torch trains on (the numbers differ per
# architecture): waits (futex, polls, reads, sleeps) and the kernel's own work for it (syncs and writes to storage,
# file-system metadata, the memory map, starting a process).
_SYSCALLS: dict[str, dict[int, str]] = {
    "x86_64": {0: "read", 1: "write", 2: "open", 4: "stat", 6: "lstat", 7: "poll", 9: "mmap", 10: "mprotect",
               11: "munmap", 12: "brk", 16: "ioctl", 17: "pread64", 18: "pwrite64", 19: "readv", 20: "writev",
               21: "access", 23: "select", 25: "mremap", 26: "msync", 28: "madvise", 34: "pause", 35: "nanosleep",
               40: "sendfile", 42: "connect", 43: "accept", 44: "sendto", 45: "recvfrom", 46: "sendmsg",
               47: "recvmsg", 56: "clone", 57: "fork", 58: "vfork", 59: "execve", 61: "wait4", 72: "fcntl",
               73: "flock", 74: "fsync", 75: "fdatasync", 77: "ftruncate", 82: "rename", 83: "mkdir",
               87: "unlink", 128: "rt_sigtimedwait", 149: "mlock", 151: "mlockall", 162: "sync",
               202: "futex", 208: "io_getevents", 209: "io_submit", 217: "getdents64", 230: "clock_nanosleep",
               232: "epoll_wait", 247: "waitid", 257: "openat", 258: "mkdirat", 262: "newfstatat", 263: "unlinkat",
               264: "renameat", 269: "faccessat", 270: "pselect6", 271: "ppoll", 277: "sync_file_range",
               281: "epoll_pwait", 285: "fallocate", 288: "accept4", 296: "pwritev", 299: "recvmmsg",
               306: "syncfs", 316: "renameat2", 328: "pwritev2", 332: "statx", 426: "io_uring_enter",
               435: "clone3", 439: "faccessat2", 441: "epoll_pwait2", 449: "futex_waitv"},
    "aarch64": {2: "io_submit", 4: "io_getevents", 22: "epoll_pwait", 25: "fcntl", 29: "ioctl", 32: "flock",
                34: "mkdirat", 35: "unlinkat", 38: "renameat", 46: "ftruncate", 47: "fallocate", 48: "faccessat",
                56: "openat", 61: "getdents64", 63: "read", 64: "write", 65: "readv", 66: "writev",
                67: "pread64", 68: "pwrite64", 70: "pwritev", 72: "pselect6", 73: "ppoll", 79: "newfstatat",
                81: "sync", 82: "fsync", 83: "fdatasync", 84: "sync_file_range", 98: "futex", 101: "nanosleep",
                115: "clock_nanosleep", 137: "rt_sigtimedwait", 202: "accept", 203: "connect", 206: "sendto",
                207: "recvfrom", 211: "sendmsg", 212: "recvmsg", 214: "brk", 215: "munmap", 216: "mremap",
                220: "clone", 221: "execve", 222: "mmap", 226: "mprotect", 227: "msync", 228: "mlock",
                230: "mlockall", 233: "madvise", 242: "accept4", 243: "recvmmsg", 260: "wait4", 267: "syncfs",
                276: "renameat2", 287: "pwritev2", 291: "statx", 426: "io_uring_enter", 435: "clone3",
                439: "faccessat2", 441: "epoll_pwait2", 449: "futex_waitv"},
}


def syscall_names(machine: str) -> dict[int, str]:
    """The system calls we name on ``machine`` (``platform.machine()``), by number; {} for another."""
    return _SYSCALLS.get(machine, {})


_SYSCALL_NAMES = syscall_names(platform.machine())
_WCHAN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]{0,127}$")


class TargetReader(Protocol):
    """What a blocked call works on (``sources.storage.StorageReader``, which reads the call names from here)."""

    def target(self, text: str) -> str | None: ...

    def settings(self, path: str) -> tuple[str, ...]: ...


def parse_wchan(text: str) -> str | None:
    """The kernel function a sleeping thread waits in; None when running ("0") or not a symbol name."""
    text = text.strip()
    return text if text != "0" and _WCHAN.match(text) else None


def parse_syscall(text: str, names: dict[int, str] | None = None) -> str | None:
    """The blocking system call's name from /proc/.../syscall ("202 0x... sp pc"), or None: running ("running"),
    not in a system call ("-1 ..."), or a number we do not name (then "syscall N")."""
    first = text.split(maxsplit=1)[0] if text.strip() else ""
    if not first.isdigit():
        return None
    number = int(first)
    table = _SYSCALL_NAMES if names is None else names
    return table.get(number, f"syscall {number}")


def fd_links(fd_dir: Path, limit: int) -> Iterator[tuple[str, str]]:
    """(descriptor, what it points at) for the first ``limit`` descriptors of ``/proc/PID/fd`` whose link reads
    (``/dev/nvidia0``, ``pipe:[1]``, ``socket:[2]``); OSError when the directory cannot be listed."""
    for name in os.listdir(fd_dir)[:limit]:
        try:
            yield name, os.readlink(fd_dir / name)
        except OSError:
            continue


def _optional(path: Path, parse: Callable[[str], str | None]) -> str | None:
    try:
        return parse(_read(path, 512))
    except OSError:  # syscall needs ptrace permission; wchan may be hidden: the reading is optional
        return None


def read_thread(pid: int, tid: int, *, clock: Callable[[], float] = time.monotonic,
                storage: TargetReader | None = None) -> ProcThreadSample | None:
    """One thread's readings, or None when it vanished (or its files are unreadable/malformed) meanwhile.
    ``storage``: where given, the file a thread blocked in a file system call works on, and its directory's
    settings."""
    base = PROC / str(pid) / "task" / str(tid)
    try:
        stat = parse_stat_fields(_read(base / "stat"))
        comm_stat, state, utime, stime = stat.comm, stat.state, stat.utime_ticks, stat.stime_ticks
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
    sleeping = state != "R"
    syscall_text = _optional(base / "syscall", lambda text: text) if sleeping else None
    target = storage.target(syscall_text) if storage is not None and syscall_text else None
    return ProcThreadSample(
        tid=tid,
        comm=printable(comm),  # the program names its threads (prctl): it could name one "\x1b[2J"
        state=state,
        utime_s=utime / _CLK_TCK,
        stime_s=stime / _CLK_TCK,
        run_ns=run_ns,
        runq_wait_ns=wait_ns,
        monotonic_s=clock(),
        wchan=_optional(base / "wchan", parse_wchan) if sleeping else None,
        syscall=parse_syscall(syscall_text) if syscall_text else None,
        syscall_target=target,
        target_settings=storage.settings(target) if storage is not None and target else (),
        nice=stat.nice,
        policy=stat.policy,
        minflt=stat.minflt,
        majflt=stat.majflt,
    )


MAX_FDS_COUNTED = 1 << 20  # a listing longer than this is not counted further (bounded work per sweep)


def read_process(pid: int, *, clock: Callable[[], float] = time.monotonic) -> ProcessSample:
    """RSS, thread count and open file descriptors of ``pid``; a field that cannot be read is None."""
    base = PROC / str(pid)
    rss: int | None = None
    threads: int | None = None
    fds: int | None = None
    try:
        rss = int(_read(base / "statm", 256).split()[1]) * _PAGE_BYTES
    except (OSError, ValueError, IndexError):
        pass
    try:
        threads = len(os.listdir(base / "task"))
    except OSError:
        pass
    files: list[str] | None = None
    try:
        with os.scandir(base / "fd") as entries:
            fds, files = 0, []
            for entry in entries:
                fds += 1
                if fds <= MAX_FDS_NAMED:
                    _add_file(files, entry.path)
                if fds >= MAX_FDS_COUNTED:
                    break
    except OSError:
        fds = None
    return ProcessSample(monotonic_s=clock(), rss_bytes=rss, threads=threads, open_fds=fds,
                         host_available_bytes=_mem_available(),
                         files_open=tuple(files) if files is not None else None)


# Descriptors whose link is read each sweep, and the files kept of them: a readlink is a few microseconds, so a
# sweep of a process with thousands open stays under a few milliseconds.
MAX_FDS_NAMED = 512
MAX_FILES_LISTED = 64


def _add_file(files: list[str], fd_path: str) -> None:
    """The descriptor's file, where it is a file on a disk (not a device, /proc or /sys, a pipe, a socket)."""
    if len(files) >= MAX_FILES_LISTED:
        return
    try:
        target = os.readlink(fd_path)
    except OSError:  # closed meanwhile
        return
    if target.startswith("/") and not target.startswith(("/dev/", "/proc/", "/sys/")) and target not in files:
        files.append(target[:4096])


def _mem_available() -> int | None:
    try:
        for line in _read(PROC / "meminfo", 8192).splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


MAX_CHILDREN_LISTED = 256


def python_children(pid: int) -> tuple[int, ...]:
    """The direct children of ``pid`` that run a Python interpreter (by their executable's name), oldest first."""
    found: dict[int, None] = {}
    try:
        tasks = os.listdir(PROC / str(pid) / "task")
    except OSError:
        return ()
    for tid in tasks:
        try:
            text = _read(PROC / str(pid) / "task" / tid / "children", 65536)
        except OSError:
            continue
        for token in text.split():
            if token.isdigit() and len(found) < MAX_CHILDREN_LISTED:
                found.setdefault(int(token), None)
    out = []
    for child in sorted(found):
        try:
            exe = os.path.basename(os.readlink(PROC / str(child) / "exe"))
        except OSError:
            continue
        if exe.startswith("python"):
            out.append(child)
    return tuple(out)


def thread_ids(pid: int) -> tuple[int, ...]:
    try:
        names = os.listdir(PROC / str(pid) / "task")
    except FileNotFoundError:
        raise _no_process(pid) from None
    except PermissionError:
        raise AttachError(f"not allowed to read /proc/{pid}/task", ExitCode.PERMISSION) from None
    return tuple(sorted(int(n) for n in names if n.isdigit()))


def read_threads(pid: int, *, clock: Callable[[], float] = time.monotonic,
                 storage: TargetReader | None = None) -> tuple[ProcThreadSample, ...]:
    """Every thread of ``pid`` (threads that exit during the sweep are skipped). AttachError if pid is gone."""
    out = []
    for tid in thread_ids(pid):
        sample = read_thread(pid, tid, clock=clock, storage=storage)
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


# The one liveness check of the package (probes use it too): same PID *and* same start time, zombies are gone.
process_alive = proc.process_alive



@dataclass(frozen=True, slots=True)
class CpuTimes:
    """Cumulative idle and total jiffies of a set of CPUs (from /proc/stat), for "how many cores are free"."""

    idle_ticks: int
    total_ticks: int
    n_cpus: int
    monotonic_s: float


def parse_proc_stat(text: str, cpus: frozenset[int] | None = None) -> tuple[int, int, int]:
    """(idle ticks, total ticks, CPUs counted) over the ``cpuN`` lines of /proc/stat (all CPUs when None).
    Idle includes iowait: a CPU waiting for I/O is free to run py-spy."""
    idle = total = n = 0
    for line in text.splitlines():
        if not line.startswith("cpu") or line.startswith("cpu "):
            continue
        name, *fields = line.split()
        if not name[3:].isdigit() or len(fields) < 5:
            continue
        if cpus is not None and int(name[3:]) not in cpus:
            continue
        try:
            values = [int(v) for v in fields[:8]]
        except ValueError:
            raise ProcParseError(f"/proc/stat: non-integer field in {name}") from None
        idle += values[3] + values[4]  # idle + iowait
        total += sum(values)  # user nice system idle iowait irq softirq steal (guest is inside user)
        n += 1
    if n == 0:
        raise ProcParseError("/proc/stat: no cpuN lines")
    return idle, total, n


def read_cpu_times(cpus: frozenset[int] | None = None, *, clock: Callable[[], float] = time.monotonic) -> CpuTimes:
    """Idle/total time of ``cpus`` (the CPUs a process may run on); OSError/ProcParseError when unreadable."""
    idle, total, n = parse_proc_stat(_read(PROC / "stat", 1 << 20), cpus)
    return CpuTimes(idle_ticks=idle, total_ticks=total, n_cpus=n, monotonic_s=clock())


def idle_cores(before: CpuTimes, after: CpuTimes) -> float | None:
    """Cores' worth of idle CPU between two readings of the same CPUs; None when no time passed."""
    total = after.total_ticks - before.total_ticks
    if total <= 0 or after.n_cpus != before.n_cpus:
        return None
    return max(0.0, min(1.0, (after.idle_ticks - before.idle_ticks) / total)) * after.n_cpus


def allowed_cpus(pid: int) -> frozenset[int] | None:
    """The CPUs ``pid`` may run on (its affinity), None when we cannot tell."""
    try:
        return frozenset(os.sched_getaffinity(pid))
    except OSError:
        return None


def all_children(pid: int) -> tuple[int, ...]:
    """The direct children of ``pid`` (any program), oldest PID first; none when unreadable or gone."""
    found: dict[int, None] = {}
    try:
        tasks = os.listdir(PROC / str(pid) / "task")
    except OSError:
        return ()
    for tid in tasks:
        try:
            text = _read(PROC / str(pid) / "task" / tid / "children", 65536)
        except OSError:
            continue
        for token in text.split():
            if token.isdigit() and len(token) < 12 and len(found) < MAX_CHILDREN_LISTED:
                found.setdefault(int(token), None)
    return tuple(sorted(found))
