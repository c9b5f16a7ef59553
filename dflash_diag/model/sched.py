"""The operating system's view of a process: how the scheduler runs its threads, what the cgroup allows it, the
pressure it is under, its children, and the process-wide settings read from outside (the environment, the CPUs
it may use, the thread-pool libraries it maps). Read by ``sources.sched``; summarised by ``analysis.sched``.

Plain frozen dataclasses of str/int/float/bool, tuples and ``Maybe`` only (they serialise without a codec).
Cumulative counters are kept as the kernel gives them: the analysis takes differences over the window.
"""

from __future__ import annotations

from dataclasses import dataclass

from dflash_diag.model.common import NA, Maybe


def parse_cpu_list(text: str) -> frozenset[int]:
    """``0-3,8,10-11`` -> {0,1,2,3,8,10,11}; malformed parts are skipped (bounded: at most 65536 CPUs)."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            a = int(lo)
            b = int(hi) if sep else a
        except ValueError:
            continue
        if 0 <= a <= b < 65536:
            cpus.update(range(a, b + 1))
    return frozenset(cpus)


def cpu_list_count(text: str) -> int:
    """How many CPUs a ``Cpus_allowed_list`` names."""
    return len(parse_cpu_list(text))


# Linux scheduling policies (sched(7)) as /proc/PID/task/TID/stat field 41 gives them.
SCHED_BATCH = 3
SCHED_IDLE = 5
POLICY_NAMES = {0: "SCHED_OTHER", 1: "SCHED_FIFO", 2: "SCHED_RR", SCHED_BATCH: "SCHED_BATCH", SCHED_IDLE: "SCHED_IDLE",
                6: "SCHED_DEADLINE"}

@dataclass(frozen=True, slots=True)
class TaskSched:
    """One OS thread of the process (``/proc/PID/task/TID/status``): its context switches so far and the CPUs it
    may run on. Its on-CPU time and run delay (schedstat) are in ``ProcThreadSample``."""

    tid: int
    comm: str  # the kernel's name for it: OpenMP and MKL workers inherit their creator's ("python")
    voluntary_switches: int  # it gave up the CPU: blocked, slept, waited for a lock or the GIL
    involuntary_switches: int  # the scheduler took the CPU away: another thread was due (a busy machine)
    cpus_allowed: str  # Cpus_allowed_list: "0-1", "0"


@dataclass(frozen=True, slots=True)
class ChildSched:
    """A direct child process, summed over its threads (what it adds to the demand on the cores)."""

    pid: int
    comm: str
    threads: int
    run_ns: int  # on-CPU time of its threads so far (schedstat)
    runq_wait_ns: int  # their time runnable but waiting for a CPU
    start_ticks: int  # /proc/PID/stat field 22: a PID reused by a new child is another child
    # How the scheduler weighs it against the process's threads: its nice and policy (stat fields 19 and 41), its
    # session (field 6) and its autogroup (/proc/PID/autogroup: "autogroup-812", a session's CFS task group while
    # kernel.sched_autogroup_enabled is 1). None / "" where not read (older recordings, a kernel without them).
    nice: int | None = None
    policy: int | None = None
    session: int | None = None
    autogroup: str = ""
    # Its CPU time so far in user space and in the kernel (stat fields 14 and 15, clock ticks). None: older recordings.
    user_ticks: int | None = None
    kernel_ticks: int | None = None
    # The watched process's /proc entries it had open at this sweep ("clear_refs", "smaps_rollup": the entry's name,
    # a thread's entry as "task/stat"), read only where it ran since the sweep before: a telemetry or monitoring
    # child at work on this process (each read of smaps walks its page tables, each write to clear_refs too).
    watching: tuple[str, ...] = ()

    @property
    def deprioritized(self) -> bool:
        """Scheduled behind default tasks on a contended CPU: niced above 0, or SCHED_BATCH/SCHED_IDLE."""
        return is_deprioritized(self.nice, self.policy)

    def priority_text(self) -> str:
        return priority_text(self.nice, self.policy)


def is_deprioritized(nice: int | None, policy: int | None) -> bool:
    return (nice is not None and nice > 0) or policy in (SCHED_BATCH, SCHED_IDLE)


def priority_text(nice: int | None, policy: int | None) -> str:
    """"nice 19", "SCHED_IDLE", "nice 5, SCHED_BATCH", or "nice 0"."""
    parts = [f"nice {nice}"] if nice is not None and (nice != 0 or policy in (0, None)) else []
    if policy in POLICY_NAMES and policy != 0:
        parts.append(POLICY_NAMES[policy])
    return ", ".join(parts) or "nice ?"


@dataclass(frozen=True, slots=True)
class CgroupCpu:
    """The process's CPU controller: its quota and how often it hit it (cgroup v2 ``cpu.max``/``cpu.stat``, or v1
    ``cpu.cfs_quota_us``/``cpu.stat``)."""

    version: int  # 2 or 1
    quota_cores: Maybe[float]  # quota / period; NA("no quota") when unlimited
    periods: int | None  # enforcement periods that had runnable threads (nr_periods)
    throttled_periods: int | None  # ... in which the group ran out of quota and was stopped (nr_throttled)
    throttled_us: int | None  # time its threads were held back, summed over CPUs (throttled_usec / throttled_time)


@dataclass(frozen=True, slots=True)
class CgroupMemory:
    """A memory controller's limit and its counters (cgroup v2 ``memory.max``/``memory.high``, ``memory.events``,
    ``memory.stat``; v1 ``memory.limit_in_bytes``, ``memory.failcnt``, ``memory.stat``), read at one moment."""

    version: int  # 2 or 1
    group: str  # the group's directory name (not its path)
    limit_bytes: int  # the smallest finite limit of the group and its ancestors
    usage_bytes: int | None  # memory.current / memory.usage_in_bytes, the page cache included
    # How often the group reached its limit, counted since it was made: v1 memory.failcnt, v2 memory.events' max and
    # high. Each is a charge the kernel met by reclaiming the group's own pages first.
    limit_hits: int | None
    # v2: pages of file data read again after the kernel reclaimed them (memory.stat workingset_refault_file);
    # v1 keeps no such count: pages charged to the group (memory.stat pgpgin), what reclaim makes it bring in again.
    pages_in: int | None
    pages_in_are_refaults: bool


# A memory cgroup's limit binds where, between two readings, its charges met the limit this often a second (each one
# met by reclaiming the group's own pages, its page cache first) and its usage stands at LIMIT_FULL_SHARE of it.
MEMORY_LIMIT_HITS_PER_S = 10.0
LIMIT_FULL_SHARE = 0.9
PAGE_BYTES = 4096  # memory.stat's page counters count base pages: 4 KiB on x86-64 and most arm64 kernels


def size_text(n_bytes: int) -> str:
    """"64 MiB", "1.5 GiB"."""
    if n_bytes >= 1 << 30:
        return f"{n_bytes / (1 << 30):.3g} GiB"
    return f"{n_bytes / (1 << 20):.3g} MiB"


def memory_limit_binding(before: CgroupMemory, now: CgroupMemory, elapsed_s: float) -> str | None:
    """What a memory limit does between two readings of its group ``elapsed_s`` apart, where it binds: "its usage at
    the limit, which its charges met 143,646 times a second between reads (memory.failcnt), ...; 569.1 MB/s of pages
    charged to it (memory.stat pgpgin)"; None where it does not (or the readings are not of one group). Pure: one
    rule for a peer's group and the watched process's own."""
    if (now.limit_hits is None or before.limit_hits is None or elapsed_s <= 0 or before.group != now.group
            or now.limit_hits < before.limit_hits):
        return None
    hits_per_s = (now.limit_hits - before.limit_hits) / elapsed_s
    full = now.usage_bytes is None or now.usage_bytes >= LIMIT_FULL_SHARE * now.limit_bytes
    if hits_per_s < MEMORY_LIMIT_HITS_PER_S or not full:
        return None
    counter = "memory.events max and high" if now.version == 2 else "memory.failcnt"
    text = (f"its usage at the limit, which its charges met {hits_per_s:,.0f} times a second between reads "
            f"({counter}), each met by reclaiming its own pages")
    if now.pages_in is not None and before.pages_in is not None and now.pages_in >= before.pages_in:
        rate_mb_s = (now.pages_in - before.pages_in) * PAGE_BYTES / elapsed_s / 1e6
        text += (f"; {rate_mb_s:,.1f} MB/s of file pages read again after reclaim (workingset_refault_file)"
                 if now.pages_in_are_refaults else f"; {rate_mb_s:,.1f} MB/s of pages charged to it (memory.stat "
                 f"pgpgin)")
    return text


@dataclass(frozen=True, slots=True)
class IoLimit:
    """One block-I/O limit of a cgroup on one disk and the group's counter it caps, read at one moment (v2 ``io.max``
    with ``io.stat``; v1 ``blkio.throttle.*_device`` with ``blkio.throttle.io_service_bytes``/``io_serviced``)."""

    group: str  # the group's directory name
    device: str  # "254:0"
    what: str  # "read bytes", "write bytes", "read ops", "write ops"
    limit_per_s: int
    done: int  # the group's count of that kind on that disk so far


# A limit binds where, between two readings, the group did this share of it or more.
IO_LIMIT_SHARE = 0.8


def io_limit_binding(before: IoLimit, now: IoLimit, elapsed_s: float) -> tuple[str, str] | None:
    """("24 MiB/s of reads on disk 254:0", "it read 23.6 MiB/s between reads, 98% of the limit") where the group ran
    at IO_LIMIT_SHARE of the limit or more between two readings ``elapsed_s`` apart; None elsewhere. Pure."""
    if elapsed_s <= 0 or (before.group, before.device, before.what) != (now.group, now.device, now.what) \
            or now.done < before.done or now.limit_per_s <= 0:
        return None
    rate = (now.done - before.done) / elapsed_s
    if rate < IO_LIMIT_SHARE * now.limit_per_s:
        return None
    kind, unit = now.what.split(" ", 1)
    share = f"between reads, {100 * rate / now.limit_per_s:.0f}% of the limit"
    if unit == "bytes":
        verb = "read" if kind == "read" else "wrote"
        return (f"{now.limit_per_s / (1 << 20):.3g} MiB/s of {kind}s on disk {now.device}",
                f"it {verb} {rate / (1 << 20):.3g} MiB/s {share}")
    return (f"{now.limit_per_s:,} {kind}s a second on disk {now.device}",
            f"it made {rate:,.0f} {kind}s a second {share}")


@dataclass(frozen=True, slots=True)
class Pressure:
    """Pressure stall information of one resource (``/proc/pressure/*`` or the cgroup's ``*.pressure``):
    microseconds during which some (or all) non-idle tasks were stalled on it, cumulative."""

    resource: str  # "cpu", "memory", "io"
    scope: str  # "cgroup" (the process's own group) or "system"
    some_us: int
    full_us: int | None  # None where the kernel gives no "full" line (cpu at system scope on older kernels)


@dataclass(frozen=True, slots=True)
class ProcessIo:
    """The process's I/O counters so far (/proc/PID/io): what it read through system calls, and what of that the
    kernel had to fetch from storage (the rest came from the page cache)."""

    rchar: int  # bytes read by read-like system calls (page cache or not; pipes and sockets too)
    read_bytes: int  # bytes fetched from the storage layer for this process
    syscr: int  # read-like system calls
    # What it wrote through system calls (files, pipes, sockets, the terminal) and how many write-like calls that
    # took; None in recordings made before these were read.
    wchar: int | None = None
    syscw: int | None = None


@dataclass(frozen=True, slots=True)
class IoRates:
    """A process's /proc/PID/io counters a second between two readings."""

    read_calls: float  # syscr: read-like system calls
    read_bytes: float  # rchar: bytes those calls read (page cache, pipes and sockets too)
    storage_bytes: float  # read_bytes: what the kernel fetched from storage for them
    write_calls: float | None  # syscw; None where the readings hold no write counters (older recordings)
    written_bytes: float | None  # wchar


def io_rates_between(first: ProcessIo, last: ProcessIo, span_s: float) -> IoRates | None:
    """The counters a second from ``first`` to ``last``, ``span_s`` apart; None where no time passed or a counter
    went backwards (the PID was reused): one rule for the watched process's window and a peer's two reads."""
    if span_s <= 0 or last.syscr < first.syscr or last.rchar < first.rchar or last.read_bytes < first.read_bytes:
        return None

    def per_s(start: int | None, end: int | None) -> float | None:
        return None if start is None or end is None or end < start else (end - start) / span_s

    return IoRates(read_calls=(last.syscr - first.syscr) / span_s, read_bytes=(last.rchar - first.rchar) / span_s,
                   storage_bytes=(last.read_bytes - first.read_bytes) / span_s,
                   write_calls=per_s(first.syscw, last.syscw), written_bytes=per_s(first.wchar, last.wchar))


@dataclass(frozen=True, slots=True)
class Connecting:
    """The process's TCP connections still being opened to one endpoint at a sweep (SYN_SENT: the SYN not answered
    yet), with the socket that listens there where it is on this machine: a connection the listener's kernel
    refused (its accept queue full) waits for the SYN to be sent again, 1 s later, then 3 s, 7 s..."""

    remote: str  # "127.0.0.1:42249"
    sockets: int  # the process's sockets opening a connection to it
    retransmits: int  # the most SYNs one of them has sent again
    listener_pid: int | None = None  # the process that listens there (the process or one of its children), if found
    accept_queue: int | None = None  # connections waiting in the listener's accept queue
    backlog: int | None = None  # the listener's listen() backlog (the kernel's cap on that queue)


@dataclass(frozen=True, slots=True)
class SchedSample:
    """One sweep of the scheduler's view (about once a second)."""

    monotonic_s: float
    tasks: tuple[TaskSched, ...]
    children: tuple[ChildSched, ...] = ()
    cgroup: Maybe[CgroupCpu] = NA("not read")
    pressure: tuple[Pressure, ...] = ()
    procs_running: int | None = None  # runnable tasks on the whole machine at that instant (/proc/stat)
    # The memory limit of the process's cgroup (or an ancestor's) and its group's counters; None where no finite
    # limit is set, the controller is not visible, or not read (older recordings).
    cgroup_memory: CgroupMemory | None = None
    children_listed: int = 0  # direct children seen (the tuple above may be capped)
    io: ProcessIo | None = None  # None where not read (older recordings, no permission)
    connecting: tuple[Connecting, ...] = ()
    # The network namespace's count of connections refused at a full accept queue so far (/proc/PID/net/netstat,
    # TcpExt ListenOverflows); None where not read.
    listen_overflows: int | None = None


@dataclass(frozen=True, slots=True)
class EnvSetting:
    """A known environment variable (``dflash_contract.settings``) set in the process or its children."""

    name: str
    value: str  # shown value: a number or a word, else "<set>"
    # "process" (it was started with it), "program" (the program set or changed it since: os.environ, putenv), or
    # "children (3)" when only its children have it (set before they started)
    where: str


@dataclass(frozen=True, slots=True)
class EnvRead:
    """An environment variable set in the process that the code it runs reads: its name appears as a string in a
    module of an installed package where the process spends its time (``sources.env_reads``)."""

    name: str
    value: str  # shown value: a number or a word, else "<set>"
    reader: str  # the module that names it, relative to site-packages ("sympy/core/cache.py")


@dataclass(frozen=True, slots=True)
class OsFacts:
    """What the process may use and what it was started with, read once per window from outside."""

    machine_cpus: int  # CPUs online on the machine
    process_cpus: str  # the process's Cpus_allowed_list ("0-1"); "" when unknown
    process_cpu_count: int  # how many CPUs that is (0 when unknown)
    env: Maybe[tuple[EnvSetting, ...]]  # NA when /proc/PID/environ is not ours to read
    libraries: tuple[str, ...] = ()  # thread-pool and device libraries mapped: "libgomp", "libiomp5", "libmkl", ...
    python_version: str = ""  # "3.11" from the executable's name when it says ("" when unknown)
    # Every known variable of each direct child's environment (``where="child PID"``), whether or not the process
    # has it too: what a child the process waits on, or shares its CPUs with, runs with.
    children_env: tuple[EnvSetting, ...] = ()
    # The machine's transparent huge pages mode (/sys/kernel/mm/transparent_hugepage/enabled): "always", "madvise"
    # (only memory the program advises), "never"; "" when unknown.
    thp_mode: str = ""
    # The machine's clock source (/sys/devices/system/clocksource/clocksource0/current_clocksource): "tsc" and the
    # like are read in user space (the vDSO); "hpet", "acpi_pm" make every clock read a system call. "" unknown.
    clocksource: str = ""
    # The process's timer slack (/proc/PID/timerslack_ns, its main thread's: threads started later inherit it): how
    # late the kernel may end a sleep or timed wait to batch wake-ups. 50,000 ns by default; None when not read.
    timerslack_ns: int | None = None
    # Files the process holds open for synchronous or direct writes (/proc/PID/fdinfo's flags: O_SYNC, O_DSYNC,
    # O_DIRECT), as "name (O_DSYNC)", by file name only: each write to them waits for the storage.
    sync_files: tuple[str, ...] = ()
    # What the kernel was told to do for this process, away from its defaults (/proc/PID/status): seccomp filters
    # run on every system call ("seccomp filters", "6"), transparent huge pages refused (prctl), speculation
    # mitigations forced on. (name, value) pairs, values from the kernel's own words and numbers.
    controls: tuple[tuple[str, str], ...] = ()
    # The process's own inotify and fanotify watches whose events fire per read, open or write of the watched files
    # (/proc/PID/fdinfo), as "inotify on the directory of gauges.bin: IN_ACCESS|IN_OPEN", by file name only.
    watches: tuple[str, ...] = ()
    # What a small read from the page cache costs on this machine, measured once per window by the tool itself (a
    # process with no filter, watch or tracer on its calls), in microseconds: the yardstick a watched process's
    # kernel time per call is read against. None where not measured (older recordings).
    read_call_us: float | None = None
    # TCP connections to one endpoint closed within the last minute, by this end (TIME_WAIT lasts 60 s on Linux,
    # /proc/PID/net/tcp): (the endpoint, how many in TIME_WAIT), for endpoints the process is connected to. A new
    # connection per request shows as thousands. Empty: none, or older recordings.
    closed_connections: tuple[tuple[str, int], ...] = ()
    # Autogroup scheduling (kernel.sched_autogroup_enabled; None where not read): with it on, every session is a CFS
    # task group of its own, weighed equally against the others, and a nice value only ranks a task inside its own
    # group. The process's session (stat field 6) and autogroup ("autogroup-812"; "autogroup-0" is the kernel's
    # default group, init's, which /proc prints as nothing), to compare its children's with.
    autogroup_enabled: bool | None = None
    session: int | None = None
    autogroup: str = ""
    # Variables outside the settings catalogue the program set or changed in its own environment since it started
    # (``os.environ[...] = ...``, most often to configure a library before importing it: only its memory has them),
    # by name only, at most MAX_PROGRAM_ENV_NAMES: what the catalogue does not know is still a setting it chose.
    env_set_by_program: tuple[str, ...] = ()


MAX_PROGRAM_ENV_NAMES = 8


@dataclass(frozen=True, slots=True)
class PeerProcess:
    """A process at the other end of a wait that left the process (a file lock's holder, a pipe's writer)."""

    pid: int
    comm: str
    cmdline: str  # redacted and shortened
    state: str  # /proc state letter: R running, S sleeping, D uninterruptible, T stopped
    cpu_pct: float | None  # % of one core between two reads (None: read once)
    top_frame: str  # its innermost Python frame of its own code, "compress (syncer.py:30)"; "" when not read
    relation: str  # "child", "parent", "sibling", "other"
    # Between the same two reads: the share of its CPU time spent in the kernel, and its read-like and write-like
    # system calls and their bytes a second (/proc/PID/io). None: read once, not ours to read, or older recordings.
    kernel_pct: float | None = None
    # Between the same two reads: the share of the time its main thread waited for a CPU (runnable, not running:
    # /proc/PID/schedstat). A busy peer on a crowded machine gets less CPU than it wants; this is the rest.
    cpu_wait_pct: float | None = None
    read_calls_per_s: float | None = None
    read_bytes_per_s: float | None = None
    write_calls_per_s: float | None = None
    written_bytes_per_s: float | None = None
    # The known settings it was started with away from their defaults (``dflash_contract.settings``, from
    # /proc/PID/environ: ``("PYTHONUNBUFFERED", "1")``), values shown as the catalogue allows.
    settings: tuple[tuple[str, str], ...] = ()
    # What the kernel does for it away from its defaults that changes how fast its code runs (/proc/PID/status, as
    # ``OsFacts.controls`` for the watched process): seccomp filters, a speculation mitigation forced on, huge pages
    # refused: ``("speculative store bypass", "thread mitigated")``.
    controls: tuple[tuple[str, str], ...] = ()
    # Its environment against the one the watched process was started with, by name only (values are never read
    # out: any of them may be a secret), for variables outside the settings catalogue: "+NAME" it has and the
    # process had not, "~NAME" set to another value, "-NAME" it lacks. A launcher's deliberate change (a library's
    # switch, a missing TZ) shows here before anything knows what it does.
    env_differs: tuple[str, ...] = ()
    # Its resource limits whose soft value differs from the watched process's (/proc/PID/limits, the CPU-time limit
    # aside: a control where it binds): (limit, its value, the process's value), "open files", "64", "20,000".
    limits_differ: tuple[tuple[str, str, str], ...] = ()
    # How the scheduler runs it, where that differs from the watched process's main thread: (what, its value, the
    # process's): ("nice", "19", "0"), ("policy", "SCHED_IDLE", "SCHED_OTHER"), ("CPUs allowed", "3", "0-15").
    sched_differs: tuple[tuple[str, str, str], ...] = ()


# The calls that send on a descriptor (Python's sendall is sendto): a thread blocked in one on a socket is the
# connection's sending end, waiting for the other end to drain it.
SENDING_CALLS = frozenset({"write", "writev", "sendto", "sendmsg", "sendmmsg", "sendfile"})


@dataclass(frozen=True, slots=True)
class TcpSender:
    """The sending end of a TCP connection as the kernel accounts it (``struct tcp_info``): its pacing cap, and how
    long since it started sending it had data to send and was held back by the receiver's window or its own send
    buffer. None where the kernel does not keep the field."""

    max_pacing_rate_bytes_s: int | None  # SO_MAX_PACING_RATE; None: no cap
    pacing_rate_bytes_s: int | None
    busy_ms: float | None
    rwnd_limited_ms: float | None
    sndbuf_limited_ms: float | None


@dataclass(frozen=True, slots=True)
class OutsideWait:
    """A thread of the process blocked on something another process holds: a file lock or a pipe/socket whose
    other end is another process."""

    tid: int
    kind: str  # "file-lock", "pipe", "pty", "socket"
    # what it waits on: the locked file (redacted path), "pipe:[1234]", a terminal's slave "/dev/pts/3",
    # "TCP 127.0.0.1:5120"
    target: str
    syscall: str  # the blocking call: "flock", "fcntl", "read"
    peers: tuple[PeerProcess, ...]
    monotonic_s: float
    # A socket's other end is blocked reading the same connection at the same time: both sides wait for bytes in
    # flight (a small write held back until an acknowledgement the peer delays), not for each other's work.
    peer_waits_back: bool = False
    # A pipe's capacity (F_GETPIPE_SZ): how far its writer can get ahead of its reader. None: not read.
    pipe_capacity_bytes: int | None = None
    # A TCP connection's sending end (the peer's socket) as the kernel accounts it (tcp_info); None: not read.
    sender: TcpSender | None = None


# --- the summary of a window (analysis.sched) --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ThreadSched:
    """One OS thread over the window: how much it ran, how long it waited for a CPU, how often it switched."""

    tid: int
    name: str  # its Python name when it runs Python, else its comm
    python: bool  # a Python thread (py-spy saw it)
    cpu_share: float  # of the window on a CPU
    runq_share: float  # of the window runnable, waiting for a CPU (schedstat run delay)
    voluntary_per_s: float | None
    involuntary_per_s: float | None
    cpus_allowed: str
    nice: int | None = None  # at the window's end (stat field 19); None where not read
    policy: int | None = None  # 0 SCHED_OTHER, 3 SCHED_BATCH, 5 SCHED_IDLE, 1/2 real-time

    @property
    def deprioritized(self) -> bool:
        """Scheduled behind default threads on a contended CPU: niced above 0, or SCHED_BATCH/SCHED_IDLE."""
        return is_deprioritized(self.nice, self.policy)

    def priority_text(self) -> str:
        return priority_text(self.nice, self.policy)

    @property
    def demand(self) -> float:
        """How much of a CPU it wanted: on one or waiting for one."""
        return self.cpu_share + self.runq_share


@dataclass(frozen=True, slots=True)
class PoolGroup:
    """Native OS threads of one name (threads Python did not start: OpenMP, MKL, inter-op, NCCL, ...)."""

    comm: str
    threads: int
    active: int  # ran at least 1% of a core over the window
    demand: float  # CPUs' worth of it runnable (on a CPU or waiting for one)


@dataclass(frozen=True, slots=True)
class CpuSetLoad:
    """The threads restricted to one set of CPUs narrower than the machine, and how much they want."""

    cpus: str  # "0"
    cpu_count: int
    threads: int
    demand: float


@dataclass(frozen=True, slots=True)
class SchedSummary:
    """The scheduler's view of one window (``analysis.sched.summarise``)."""

    window_s: float
    machine_cpus: int
    allowed_cpus: int  # the process's affinity
    quota_cores: float | None  # the cgroup's quota, None when unlimited or unknown
    cores: float  # what the process may use at once: the smaller of the two
    os_threads: int
    python_threads: int
    native_threads: int
    native_active: int
    demand: float  # threads' worth runnable, over the process and its children
    python_demand: float
    native_demand: float
    children_demand: float
    children_threads: int
    used_cores: float  # on a CPU, over the process and its children
    voluntary_per_s: float | None
    involuntary_per_s: float | None
    external_runnable: float | None  # other tasks runnable on the machine at once, on average
    throttled_share: float | None  # of the cgroup's enforcement periods in the window
    throttled_s: float | None  # CPU time its threads were held back
    pressure: tuple[tuple[str, str, float], ...]  # (resource, scope, share of the window some task stalled)
    children_started: int  # child processes that appeared during the window
    pools: tuple[PoolGroup, ...]
    cpu_sets: tuple[CpuSetLoad, ...]
    threads: tuple[ThreadSched, ...]
    libraries: tuple[str, ...] = ()
    children_used: float = 0.0  # CPUs' worth the children ran (their demand less their run delay)
    children: int = 0  # child processes at the end of the window

    @property
    def children_runq_share(self) -> float:
        """Of the time the children's threads were runnable, the share they waited for a CPU."""
        return max(0.0, 1.0 - self.children_used / self.children_demand) if self.children_demand > 0 else 0.0

    @property
    def children_started_per_s(self) -> float:
        return self.children_started / self.window_s if self.window_s > 0 else 0.0

    @property
    def switches_per_s(self) -> float | None:
        if self.voluntary_per_s is None or self.involuntary_per_s is None:
            return None
        return self.voluntary_per_s + self.involuntary_per_s


@dataclass(frozen=True, slots=True)
class SettingReading:
    """A process-wide setting that differs from its default (``analysis.settings``): shown as information, and the
    cause of a slowdown only where a rule measures its cost."""

    name: str  # "OMP_NUM_THREADS", "torch.set_num_threads", "sys.getswitchinterval()"
    value: str
    default: str
    area: str  # dflash_contract.settings.AREA_*: what it can slow
    effect: str
    source: str  # "environment", "children's environment", "set by the program", "probe", "call"
    detail: str = ""  # who set it and where: "called by pool-0, pool-1 at worker (over.py:6), 4 calls"

    def text(self) -> str:
        """``OMP_NUM_THREADS=8`` / ``torch.set_num_threads(8)`` / ``sys.getswitchinterval() = 1e-05``."""
        if self.source == "call":
            return f"{self.name}({self.value})"
        if self.name.endswith(")") or "." in self.name:
            return f"{self.name} = {self.value}"
        if " " in self.name:
            return f"{self.name}: {self.value}"
        return f"{self.name}={self.value}"
