"""Per-thread readings from /proc/<pid>/task/<tid>/{stat,schedstat,comm}."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ProcThreadSample:
    tid: int
    comm: str  # kernel thread name (15 chars); "python" unless the process renamed it
    state: str  # R, S, D, ... from stat field 3
    utime_s: float
    stime_s: float
    run_ns: int  # schedstat: on-CPU time
    runq_wait_ns: int  # schedstat: time runnable but not running
    monotonic_s: float  # when this was read
    # Where the kernel has the thread blocked, when it sleeps: the wait channel ("futex_wait_queue",
    # "unix_stream_read_generic", "ep_poll", "hrtimer_nanosleep"...) and the system call's name ("futex",
    # "recvfrom", "epoll_wait"...). None when running, unknown or not readable.
    wchan: str | None = None
    syscall: str | None = None
    # The file that call works on where it is a file system call (a descriptor's file, a path argument read from the
    # process's memory: ``sources.storage``), and what the kernel does to calls in its directory away from its
    # defaults ("its directory has the dirsync attribute (chattr +D): ..."). None and () where not read.
    syscall_target: str | None = None
    target_settings: tuple[str, ...] = ()
    # The scheduler's weighting of the thread (stat fields 19 and 41): nice (-20..19, 0 by default) and policy
    # (0 SCHED_OTHER, 3 SCHED_BATCH, 5 SCHED_IDLE, 1/2 real-time). None where not read (older recordings).
    nice: int | None = None
    policy: int | None = None
    # Page faults of the thread so far (stat fields 10 and 12): minor (memory first touched: each 4 KiB page of a
    # fresh buffer, unless huge pages back it) and major (read from disk or swap). None where not read.
    minflt: int | None = None
    majflt: int | None = None


@dataclass(frozen=True, slots=True)
class ProcessSample:
    """Whole-process resources at one instant (/proc/<pid>/statm, status, fd): what trends over a window show."""

    monotonic_s: float
    rss_bytes: int | None  # resident set size; None when unreadable
    threads: int | None
    open_fds: int | None  # None when /proc/<pid>/fd is not ours to list
    host_available_bytes: int | None = None  # /proc/meminfo MemAvailable: what the host can still hand out
    # The regular files it holds open at this instant (paths, the first MAX_FILES_LISTED descriptors that are files
    # on a disk): from one reading to the next, a file that comes and goes is one the program opens and closes
    # again and again (a journal per transaction, a log reopened per record). None where not read.
    files_open: tuple[str, ...] | None = None
