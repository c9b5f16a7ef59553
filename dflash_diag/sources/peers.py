"""Waits that leave the process: a thread blocked on a file lock another process holds, or on a pipe whose other
end is another process; and what that process does. From /proc only (``locks``, ``task/TID/syscall``, ``fd``,
``fdinfo``), plus one non-blocking py-spy dump of a Python peer.

How each wait is found:

- **a file lock** (``flock``, ``fcntl``/POSIX, OFD): ``/proc/locks`` lists every lock, and every waiter on a line
  of its own marked ``->`` with the waiting process's PID and the file's ``device:inode``. The holders are the
  lines of the same file without the mark. The locked file is named from the process's own descriptors (the one
  whose ``stat`` has that inode); the waiting thread is the one parked in ``flock``/``fcntl``.
- **a pipe**: a thread parked in ``read``/``write`` (``/proc/PID/task/TID/syscall`` gives the call and its first
  argument, the descriptor) on a ``pipe:[inode]``. The other end is any other process holding that inode open
  the other way (``fdinfo``'s flags): looked for among the process's relatives first (children, parent,
  siblings), then the user's other processes, within a fixed budget of processes and time. Its capacity
  (``F_GETPIPE_SZ``) is asked once per pipe, on a read-only, non-blocking descriptor of our own opened through
  ``/proc/PID/fd/N`` and closed at once: nothing is read from the pipe or written to it.
- **a pseudo-terminal**: the same, on the master side of a pty (``/dev/ptmx``); the other end is the holder of its
  slave (``/dev/pts/N``, N from ``fdinfo``'s ``tty-index``), such as a child given the terminal as its stdout.

``syscall`` needs the permission ptrace needs (the tool has it wherever py-spy works); without it a pipe's peer is
not found and the wait stays what the stacks say it is (an I/O wait). Costs are bounded and measured by
``bench/sched_readers.py``: a read of ``/proc/locks`` and, for a blocked thread, a handful of links.
"""

from __future__ import annotations

import fcntl
import os
import platform
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from dflash_contract import proc as contract_proc
from dflash_contract.redact import redact_argv, scrub_text, secret_values
from dflash_contract.settings import ENV_BY_NAME, interpreter_options, known_env, shown_env_value
from dflash_diag.model import Frame, ProcThreadSample, StackSample
from dflash_diag.model.evidence import is_library_file
from dflash_diag.model.sched import (
    SENDING_CALLS,
    CgroupCpu,
    CgroupMemory,
    IoLimit,
    IoRates,
    OutsideWait,
    PeerProcess,
    ProcessIo,
    TcpSender,
    io_limit_binding,
    io_rates_between,
    memory_limit_binding,
    size_text,
)
from dflash_diag.model.text import printable
from dflash_diag.sources.procfs import ProcParseError, all_children, fd_links, parse_schedstat
from dflash_diag.sources.sched import (
    CLK_TCK,
    CPU_QUOTA,
    IO_LIMIT,
    LOCKED_MEMORY,
    MAX_TCP_TABLE_BYTES,
    MEMORY_LIMIT,
    SYS_CGROUP,
    argv_of,
    cgroup_dirs,
    limits_differences,
    parse_cpu_time_limit,
    parse_io,
    parse_limits,
    parse_process_controls,
    parse_tcp_lines,
    read_cgroup_cpu,
    read_cgroup_io,
    read_cgroup_memory,
    started_environ,
    status_fields,
    tcp_addr_text,
    without_own_tracers,
)
from dflash_diag.sources.sock_diag import same_network_namespace, tcp_info, unix_peer_inode

PROC = Path("/proc")
MAX_LOCKS_BYTES = 1 << 20
MAX_FDS = 4096  # descriptors looked at per process
MAX_PEER_TASKS = 256  # a peer's threads looked at for one blocked on the same connection
MAX_SCAN_PROCESSES = 512  # processes searched for a pipe's other end
MAX_KNOWN_SOCKETS = 256  # sockets whose ends are remembered (TCP, and those not TCP)
SCAN_BUDGET_S = 0.05  # ... and for at most this long per sweep
CMDLINE_CHARS = 160
# A peer's locked memory (VmLck) that moves this much between reads is locked as it is mapped (MCL_FUTURE).
LOCK_CHANGE_KIB = 4 * 1024

ENV_NAME_CHARS = 40
_POLICIES = {0: "SCHED_OTHER", 1: "SCHED_FIFO", 2: "SCHED_RR", 3: "SCHED_BATCH", 5: "SCHED_IDLE", 6: "SCHED_DEADLINE"}
MAX_ENV_DIFFERENCES = 8
# A shell's, a terminal's and a test runner's own variables: they differ between any two processes.
_ENV_BOOKKEEPING = re.compile(r"^(_|SHLVL|PWD|OLDPWD|LINES|COLUMNS|PS\d|TERM|TERMCAP|PYTEST_.*|COV_CORE_.*|"
                              r"DFLASH_DIAG_.*|JPY_.*|INVOCATION_ID|JOURNAL_STREAM|SSH_.*|XDG_.*)$")


def env_differences(own: dict[str, str], theirs: dict[str, str]) -> tuple[str, ...]:
    """"+NAME" set in ``theirs`` only, "~NAME" set to another value, "-NAME" set in ``own`` only: names outside the
    settings catalogue and a shell's bookkeeping, at most MAX_ENV_DIFFERENCES (added first: a launcher's switch)."""
    def kept(name: str) -> bool:
        return name not in ENV_BY_NAME and not _ENV_BOOKKEEPING.match(name)

    added = [f"+{n}" for n in theirs if n not in own and kept(n)]
    changed = [f"~{n}" for n in theirs if n in own and own[n] != theirs[n] and kept(n)]
    lacked = [f"-{n}" for n in own if n not in theirs and kept(n)]
    return tuple([*sorted(added), *sorted(changed), *sorted(lacked)][:MAX_ENV_DIFFERENCES])


# The blocking calls whose first argument is the descriptor waited on, per architecture.
_FD_CALLS: dict[str, dict[int, str]] = {
    "x86_64": {0: "read", 1: "write", 17: "pread64", 19: "readv", 20: "writev", 44: "sendto", 45: "recvfrom",
               46: "sendmsg", 47: "recvmsg", 72: "fcntl", 73: "flock"},
    "aarch64": {25: "fcntl", 32: "flock", 63: "read", 64: "write", 65: "readv", 66: "writev", 67: "pread64",
                206: "sendto", 207: "recvfrom", 211: "sendmsg", 212: "recvmsg"},
}
_FD_CALL_NAMES = frozenset(name for table in _FD_CALLS.values() for name in table.values())
_LOCK_CALLS = frozenset({"flock", "fcntl"})
_WRITES = frozenset({"write", "writev"})
_F_GETPIPE_SZ = getattr(fcntl, "F_GETPIPE_SZ", 1032)  # Linux's fcntl command (Python 3.10+ names it)


def parse_syscall_fd(text: str, table: dict[int, str] | None = None) -> tuple[str, int] | None:
    """(call, descriptor) of a thread blocked in a call on a descriptor (``/proc/.../syscall``); None otherwise."""
    parts = text.split()
    if len(parts) < 2 or not parts[0].isdigit():
        return None
    name = (table if table is not None else _FD_CALLS.get(platform.machine(), {})).get(int(parts[0]))
    if name is None:
        return None
    try:
        fd = int(parts[1], 16)
    except ValueError:
        return None
    return (name, fd) if 0 <= fd < (1 << 20) else None


@dataclass(frozen=True, slots=True)
class LockLine:
    pid: int
    file_id: str  # "MAJ:MIN:INODE" (hex major:minor as the kernel writes them, decimal inode)
    waiting: bool  # a "->" line: this PID waits for the lock
    kind: str  # FLOCK, POSIX, OFDLCK


def parse_locks(text: str) -> tuple[LockLine, ...]:
    """The lines of ``/proc/locks``: ``1: POSIX  ADVISORY  WRITE 1234 08:01:5678 0 EOF`` and the waiters'
    ``1: -> FLOCK  ADVISORY  WRITE 4321 08:01:5678 0 EOF``."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 6:
            continue
        waiting = parts[1] == "->"
        rest = parts[2:] if waiting else parts[1:]
        if len(rest) < 5:
            continue
        kind, pid_text, file_id = rest[0], rest[3], rest[4]
        try:
            pid = int(pid_text)
        except ValueError:
            continue
        if file_id.count(":") != 2:
            continue
        out.append(LockLine(pid=pid, file_id=file_id, waiting=waiting, kind=kind))
    return tuple(out)


def parse_tcp_table(text: str) -> dict[int, tuple[str, str]]:
    """inode -> (local, remote) of each line of ``/proc/net/tcp`` or ``tcp6`` (hex ``ADDR:PORT`` as the kernel
    writes them); a socket with no inode (0: a time-wait) is left out."""
    return {int(inode): (local, remote) for local, remote, _, inode in parse_tcp_lines(text)
            if inode.isdigit() and int(inode) > 0}


def _read(path: Path, limit: int = 65536) -> str | None:
    try:
        with open(path, "rb") as fh:
            return fh.read(limit).decode("utf-8", errors="replace")
    except OSError:
        return None


def _file_id(st: os.stat_result) -> str:
    return f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"


@dataclass(frozen=True, slots=True)
class _PeerCounters:
    cpu_s: float  # user + kernel
    kernel_s: float
    io: ProcessIo | None  # /proc/PID/io: None where not ours to read
    at_s: float
    wait_s: float | None = None  # its main thread's time runnable but not running (schedstat), None: not read


@dataclass(frozen=True, slots=True)
class _PeerRates:
    cpu_pct: float | None = None
    kernel_pct: float | None = None
    io: IoRates | None = None
    wait_pct: float | None = None


def _rates(before: _PeerCounters, now: _PeerCounters) -> _PeerRates:
    """A peer's CPU and I/O a second between two reads (counters that went backwards, a PID reused: none)."""
    span_s = now.at_s - before.at_s
    cpu_s = now.cpu_s - before.cpu_s
    if span_s <= 0 or cpu_s < 0:
        return _PeerRates()
    kernel_pct = 100.0 * (now.kernel_s - before.kernel_s) / cpu_s if cpu_s > 0 else None
    io = io_rates_between(before.io, now.io, span_s) if before.io is not None and now.io is not None else None
    wait_pct = None
    if before.wait_s is not None and now.wait_s is not None and now.wait_s >= before.wait_s:
        wait_pct = 100.0 * (now.wait_s - before.wait_s) / span_s
    return _PeerRates(cpu_pct=100.0 * cpu_s / span_s, kernel_pct=kernel_pct, io=io, wait_pct=wait_pct)


def _wait_s(text: str | None) -> float | None:
    """The run-queue wait of /proc/PID/schedstat (its main thread), in seconds; None where unreadable."""
    if text is None:
        return None
    try:
        return parse_schedstat(text)[1] / 1e9
    except ProcParseError:
        return None


PeerDumper = Callable[[int], "StackSample | None"]  # one non-blocking dump of a Python peer, or None
TextRedactor = Callable[[str], str]


PEER_THROTTLED_SHARE = 0.2  # of a group's enforcement periods: its quota binds the peer
IO_BASELINE_S = 5.0  # a peer's I/O limit is weighed from its oldest reading within this long
IO_READINGS_KEPT = 16


class PeerReader:
    """The waits of ``pid``'s threads that end in another process, with what those processes do.

    ``dumper`` takes one non-blocking py-spy dump of a Python peer (once per peer: its top frame); ``redact``
    is the watched process's redactor (paths, command lines and frames it returns are redacted with it)."""

    def __init__(self, pid: int, *, proc_root: Path = PROC, dumper: PeerDumper | None = None,
                 redact: TextRedactor | None = None, clock: Callable[[], float] = time.monotonic,
                 uid: int | None = None, unix_peer: Callable[[int], int | None] = unix_peer_inode,
                 cgroup_root: Path = SYS_CGROUP) -> None:
        self.pid = pid
        self.unix_peer = unix_peer
        self.proc_root = proc_root
        self.dumper = dumper
        self.redact = redact or (lambda s: s)
        self.clock = clock
        self.uid = os.getuid() if uid is None else uid
        self._cpu: dict[int, _PeerCounters] = {}  # peer -> its CPU and I/O counters, and when read
        self._frames: dict[tuple[int, int], str] = {}  # (peer, start ticks) -> its top frame ("" when none)
        self._env: dict[tuple[int, int], tuple[tuple[str, str], ...]] = {}  # (peer, start ticks) -> its settings
        # (a pipe's inode, a socket's negated inode or a pty's slave; we read) -> peers found
        self._pipe_peers: dict[tuple[int | str, bool], tuple[int, ...]] = {}
        self._pipe_capacity: dict[int, int | None] = {}  # inode -> its capacity, read once
        # A connected socket's ends never change while its inode lives: a TCP socket's (local, remote, the peer's
        # inode), found once, and the inodes that are not TCP (a unix socket's), so a known wait reads no table.
        # Reading /proc/PID/net/tcp walks the namespace's whole connection hash, twice per read (~0.5 ms a walk on
        # a small box, more with many connections).
        self._tcp_ends: dict[int, tuple[str, str, int]] = {}
        self._not_tcp: set[int] = set()
        self.cgroup_root = cgroup_root
        # controller -> the watched process's cgroup and its ancestors in that controller's hierarchy
        self._own_groups: dict[str, frozenset[Path]] = {}
        # peer -> its block-I/O limits' recent readings (when, what), and the control the newest gave
        self._io: dict[int, tuple[list[tuple[float, tuple[IoLimit, ...]]], tuple[tuple[str, str], ...]]] = {}
        # peer -> when its memory group was last read, that reading, and the control it gave
        self._memory: dict[int, tuple[float, CgroupMemory, tuple[tuple[str, str], ...]]] = {}
        self._own_env: dict[str, str] | None = None  # the environment the watched process was started with
        self._env_differs: dict[tuple[int, int], tuple[str, ...]] = {}  # (peer, start ticks) -> names that differ
        self._own_limits: dict[str, str] | None = None  # the watched process's soft resource limits
        # (when read, its nice, policy and allowed CPUs, or None where its stat did not parse)
        self._own_sched_at: tuple[float, tuple[int | None, int | None, str] | None] | None = None
        self._limits_differ: dict[tuple[int, int], tuple[tuple[str, str, str], ...]] = {}  # (peer, start) -> ...
        self._locked: dict[tuple[int, int], tuple[int, int]] = {}  # (peer, start ticks) -> lowest, highest VmLck kB

    def __call__(self, threads: tuple[ProcThreadSample, ...]) -> tuple[OutsideWait, ...]:
        return self.read(threads)

    def read(self, threads: tuple[ProcThreadSample, ...]) -> tuple[OutsideWait, ...]:
        now = self.clock()
        blocked = self._blocked_calls(threads)
        waits = list(self._lock_waits(blocked, now))
        for tid, (call, fd) in blocked.items():
            if call in _LOCK_CALLS:
                continue
            try:
                target = os.readlink(self.proc_root / str(self.pid) / "fd" / str(fd))
            except OSError:
                continue
            wait = (self._pipe_wait(tid, call, fd, target, now) or self._pty_wait(tid, call, fd, target, now)
                    or self._socket_wait(tid, call, target, now))
            if wait is not None:
                waits.append(wait)
        return tuple(waits)

    # --- which threads are blocked on a descriptor ---------------------------------------------------------

    def _blocked_calls(self, threads: tuple[ProcThreadSample, ...]) -> dict[int, tuple[str, int]]:
        out: dict[int, tuple[str, int]] = {}
        for t in threads:
            if t.state not in ("S", "D"):
                continue
            # Only a call on a descriptor is followed (procfs's name for it, or "syscall N" where it has none).
            if t.syscall is not None and t.syscall not in _FD_CALL_NAMES and not t.syscall.startswith("syscall "):
                continue
            text = _read(self.proc_root / str(self.pid) / "task" / str(t.tid) / "syscall", 512)
            found = parse_syscall_fd(text) if text is not None else None
            if found is not None:
                out[t.tid] = found
        return out

    # --- file locks ---------------------------------------------------------------------------------------

    def _lock_waits(self, blocked: dict[int, tuple[str, int]], now: float) -> list[OutsideWait]:
        text = _read(self.proc_root / "locks", MAX_LOCKS_BYTES)
        if not text:
            return []
        lines = parse_locks(text)
        waited = {line.file_id for line in lines if line.waiting and line.pid == self.pid}
        if not waited:
            return []
        lockers = [(tid, fd) for tid, (call, fd) in blocked.items() if call in _LOCK_CALLS]
        if not lockers:
            # /proc/locks lists a waiter of this process, but no thread was seen in flock/fcntl: the lock was
            # granted between the two reads, or the call is not one we can read. Which thread waited is unknown,
            # and an edge from the wrong thread would send the graph astray: nothing is said.
            return []
        out = []
        for file_id in sorted(waited):
            holders = tuple(dict.fromkeys(line.pid for line in lines if line.file_id == file_id and not line.waiting
                                          and line.pid != self.pid and line.pid > 0))
            path, tid, call = self._locked_file(file_id, lockers)
            out.append(OutsideWait(tid=tid, kind="file-lock", target=path, syscall=call,
                                   peers=tuple(self._peer(p, now) for p in holders[:4]), monotonic_s=now))
        return out

    def _locked_file(self, file_id: str, lockers: list[tuple[int, int]]) -> tuple[str, int, str]:
        """(the locked file's redacted path, the waiting thread, its call) for a lock the process waits on; the
        thread is one seen in flock/fcntl (``lockers`` is not empty)."""
        for tid, fd in lockers:
            path = self._fd_path(self.pid, fd, file_id)
            if path is not None:
                return path, tid, "flock/fcntl"
        fd_dir = self.proc_root / str(self.pid) / "fd"
        try:
            names = os.listdir(fd_dir)[:MAX_FDS]
        except OSError:
            names = []
        for name in names:
            path = self._fd_path(self.pid, int(name), file_id) if name.isdigit() else None
            if path is not None:
                return path, lockers[0][0], "flock/fcntl"
        return f"inode {file_id.rsplit(':', 1)[-1]}", lockers[0][0], "flock/fcntl"

    def _fd_path(self, pid: int, fd: int, file_id: str) -> str | None:
        link = self.proc_root / str(pid) / "fd" / str(fd)
        try:
            if _file_id(os.stat(link)) != file_id:
                return None
            target = os.readlink(link)
        except OSError:
            return None
        return printable(self.redact(target))

    # --- pipes ----------------------------------------------------------------------------------------------

    def _pipe_wait(self, tid: int, call: str, fd: int, target: str, now: float) -> OutsideWait | None:
        if not target.startswith("pipe:["):
            return None  # a socket (below) or a file
        try:
            inode = int(target[6:-1])
        except ValueError:
            return None
        reading = call not in _WRITES
        key = (inode, reading)
        if key not in self._pipe_peers:
            self._pipe_peers[key] = self._find_pipe_peers(target, want_writer=reading)
        peers = self._pipe_peers[key]
        if not peers:
            return None
        if inode not in self._pipe_capacity:
            self._pipe_capacity[inode] = self._read_pipe_capacity(fd)
        return OutsideWait(tid=tid, kind="pipe", target=target, syscall=call,
                           peers=tuple(self._peer(p, now) for p in peers[:4]), monotonic_s=now,
                           pipe_capacity_bytes=self._pipe_capacity[inode])

    def _read_pipe_capacity(self, fd: int) -> int | None:
        """The pipe's capacity (``F_GETPIPE_SZ``), through a read-only, non-blocking descriptor of our own opened on
        the process's (``/proc/PID/fd/N`` opens the same pipe): nothing is read from it or written to it, and it is
        closed at once. Once per pipe. None when it cannot be opened (another user's process) or asked."""
        try:
            ours = os.open(self.proc_root / str(self.pid) / "fd" / str(fd), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            return int(fcntl.fcntl(ours, _F_GETPIPE_SZ))
        except OSError:
            return None
        finally:
            os.close(ours)

    # --- pseudo-terminals ------------------------------------------------------------------------------------

    def _pty_wait(self, tid: int, call: str, fd: int, target: str, now: float) -> OutsideWait | None:
        """A thread blocked on the master side of a pseudo-terminal (``/dev/ptmx``: a child given a terminal as its
        stdout, pexpect, script): the other end is whoever holds the terminal's slave, ``/dev/pts/N`` (``fdinfo``'s
        ``tty-index``), open the other way. Every byte between them passes the kernel's terminal layer."""
        if target != "/dev/ptmx":
            return None
        info = _read(self.proc_root / str(self.pid) / "fdinfo" / str(fd), 4096) or ""
        index = next((line.split()[1] for line in info.splitlines()
                      if line.startswith("tty-index:") and len(line.split()) == 2), "")
        if not index.isdigit():
            return None
        slave = f"/dev/pts/{int(index)}"
        reading = call not in _WRITES
        key = (slave, reading)  # a name: no clash with the pipes' and sockets' inodes
        if key not in self._pipe_peers:
            self._pipe_peers[key] = self._find_holders(lambda pid: self._holds_tty(pid, slave, want_writer=reading))
        peers = self._pipe_peers[key]
        if not peers:
            return None
        return OutsideWait(tid=tid, kind="pty", target=slave, syscall=call,
                           peers=tuple(self._peer(p, now) for p in peers[:4]), monotonic_s=now)

    def _holds_tty(self, pid: int, slave: str, *, want_writer: bool) -> bool:
        """``pid`` holds the terminal's slave open for writing (``want_writer``) or reading: a terminal is most
        often opened read-write (O_RDWR), which counts for both."""
        return any(mode is None or mode == os.O_RDWR or (mode == os.O_WRONLY) == want_writer
                   for mode in self._access_modes(pid, slave))

    # --- TCP connections to a process on this machine ---------------------------------------------------------

    def _socket_wait(self, tid: int, call: str, target: str, now: float) -> OutsideWait | None:
        """A thread blocked reading a TCP connection whose other end is a process here (loopback), or sending on one
        until that process drains it: the peer is found
        through the process's network namespace's tables (``/proc/PID/net/tcp``, ``tcp6``: the two ends of a local
        connection are two lines with their addresses swapped) and the descriptors of the candidates. A unix
        socket's peer is not in /proc: the kernel's socket diagnostics name its inode (``sources.sock_diag``)."""
        if not target.startswith("socket:["):
            return None
        try:
            inode = int(target[8:-1])
        except ValueError:
            return None
        ends = self._tcp_ends.get(inode)
        if ends is None:
            if inode in self._not_tcp:
                return None if call in _WRITES else self._unix_wait(tid, call, inode, now)
            table = self._tcp_table()
            ours = table.get(inode)
            if ours is None:
                if len(self._not_tcp) >= MAX_KNOWN_SOCKETS:  # a long session's closed sockets do not pile up
                    self._not_tcp.clear()
                self._not_tcp.add(inode)
                return None if call in _WRITES else self._unix_wait(tid, call, inode, now)
            local, remote = ours
            peer_inode = next((i for i, (lo, re_) in table.items()
                               if lo == remote and re_ == local and i != inode), None)
            if peer_inode is None:
                return None  # the other end is on another machine, or gone: looked for again next read
            if len(self._tcp_ends) >= MAX_KNOWN_SOCKETS:
                self._tcp_ends.clear()
            ends = self._tcp_ends[inode] = (local, remote, peer_inode)
        local, remote, peer_inode = ends
        key = (-peer_inode, True)
        if key not in self._pipe_peers:
            held = f"socket:[{peer_inode}]"
            self._pipe_peers[key] = self._find_holders(lambda pid: next(self._fds_to(pid, held), None) is not None)
        peers = self._pipe_peers[key]
        if not peers:
            return None
        sending = call in SENDING_CALLS  # blocked until the peer drains: this end is the sender
        back = not sending and any(self._reads_socket(p, f"socket:[{peer_inode}]") for p in peers[:4])
        return OutsideWait(tid=tid, kind="socket", target=f"TCP {tcp_addr_text(remote)}", syscall=call,
                           peers=tuple(self._peer(p, now) for p in peers[:4]), monotonic_s=now,
                           peer_waits_back=back,
                           sender=self._sender(local, remote) if sending else self._sender(remote, local))

    def _sender(self, local: str, remote: str) -> TcpSender | None:
        """The peer's socket (ends ``local``, ``remote`` as it sees them) as the kernel accounts its sending: one
        exact request to the socket diagnostics, in the process's own network namespace only."""
        if self.proc_root != Path("/proc") or not same_network_namespace(self.pid):
            return None
        info = tcp_info(local, remote)
        if info is None:
            return None

        def ms(us: int | None) -> float | None:
            return us / 1e3 if us is not None else None

        return TcpSender(max_pacing_rate_bytes_s=info.max_pacing_rate_bytes_s,
                         pacing_rate_bytes_s=info.pacing_rate_bytes_s, busy_ms=ms(info.busy_us),
                         rwnd_limited_ms=ms(info.rwnd_limited_us), sndbuf_limited_ms=ms(info.sndbuf_limited_us))

    def _unix_wait(self, tid: int, call: str, inode: int, now: float) -> OutsideWait | None:
        """A thread blocked reading a unix socket whose other end another process holds (a multiprocessing
        manager's server, a local daemon): that end's inode from sock_diag, its holders from their descriptors."""
        key = (-inode, False)  # TCP peers are keyed by the peer's inode, read side: no clash
        if key not in self._pipe_peers:
            peer_inode = self.unix_peer(inode)
            held = f"socket:[{peer_inode}]"
            self._pipe_peers[key] = () if peer_inode is None else \
                self._find_holders(lambda pid: next(self._fds_to(pid, held), None) is not None)
        peers = self._pipe_peers[key]
        if not peers:
            return None
        return OutsideWait(tid=tid, kind="socket", target="unix socket", syscall=call,
                           peers=tuple(self._peer(p, now) for p in peers[:4]), monotonic_s=now)

    def _tcp_table(self) -> dict[int, tuple[str, str]]:
        """inode -> (local, remote) address of every TCP socket in the process's network namespace."""
        out: dict[int, tuple[str, str]] = {}
        for name in ("tcp", "tcp6"):
            text = _read(self.proc_root / str(self.pid) / "net" / name, MAX_TCP_TABLE_BYTES)
            out.update(parse_tcp_table(text or ""))
        return out


    def _reads_socket(self, pid: int, target: str) -> bool:
        """A thread of ``pid`` is blocked reading ``target`` (its task's blocking call and descriptor)."""
        task_dir = self.proc_root / str(pid) / "task"
        try:
            tids = os.listdir(task_dir)[:MAX_PEER_TASKS]
        except OSError:
            return False
        for tid in tids:
            text = _read(task_dir / tid / "syscall", 512)
            found = parse_syscall_fd(text) if text is not None else None
            if found is None or found[0] in SENDING_CALLS or found[0] in _LOCK_CALLS:
                continue
            try:
                if os.readlink(self.proc_root / str(pid) / "fd" / str(found[1])) == target:
                    return True
            except OSError:
                continue
        return False

    def _candidates(self) -> list[int]:
        """Processes that may hold the pipe's other end, nearest first: children, parent, siblings, then the
        user's others."""
        order: dict[int, None] = {}
        for child in all_children(self.pid):
            order.setdefault(child, None)
            for grandchild in all_children(child):
                order.setdefault(grandchild, None)
        parent = self._ppid(self.pid)
        if parent is not None and parent > 1:
            order.setdefault(parent, None)
            for sibling in all_children(parent):
                order.setdefault(sibling, None)
        try:
            everyone = sorted(int(n) for n in os.listdir(self.proc_root) if n.isdigit())
        except OSError:
            everyone = []
        for pid in everyone:
            order.setdefault(pid, None)
        order.pop(self.pid, None)
        return list(order)

    def _find_pipe_peers(self, target: str, *, want_writer: bool) -> tuple[int, ...]:
        return self._find_holders(lambda pid: self._holds_pipe_end(pid, target, want_writer))

    def _find_holders(self, holds: Callable[[int], bool]) -> tuple[int, ...]:
        """Up to four of the user's processes for which ``holds`` is true, nearest first, within the scan's
        budget of processes and time."""
        deadline = time.monotonic() + SCAN_BUDGET_S
        found: list[int] = []
        for scanned, pid in enumerate(self._candidates()):
            if scanned >= MAX_SCAN_PROCESSES or time.monotonic() > deadline:
                break
            if self._same_user(pid) and holds(pid):
                found.append(pid)
                if len(found) >= 4:
                    break
        return tuple(found)

    def _same_user(self, pid: int) -> bool:
        try:
            return os.stat(self.proc_root / str(pid)).st_uid == self.uid or self.uid == 0
        except OSError:
            return False

    def _fds_to(self, pid: int, target: str) -> Iterator[str]:
        """The descriptors of ``pid`` that point at ``target`` (``pipe:[1]``, ``socket:[2]``), by name."""
        try:
            yield from (name for name, link in fd_links(self.proc_root / str(pid) / "fd", MAX_FDS) if link == target)
        except OSError:
            return

    def _holds_pipe_end(self, pid: int, target: str, want_writer: bool) -> bool:
        return any(mode is None or (mode == os.O_WRONLY) == want_writer for mode in self._access_modes(pid, target))

    def _access_modes(self, pid: int, target: str) -> Iterator[int | None]:
        """How ``pid`` has each of its descriptors to ``target`` open (fdinfo's flags: O_RDONLY, O_WRONLY, O_RDWR);
        None where the flags are not readable."""
        for name in self._fds_to(pid, target):
            info = _read(self.proc_root / str(pid) / "fdinfo" / name, 4096) or ""
            flags = next((line.split()[1] for line in info.splitlines() if line.startswith("flags:")), None)
            yield None if flags is None else int(flags, 8) & os.O_ACCMODE

    def _ppid(self, pid: int) -> int | None:
        text = _read(self.proc_root / str(pid) / "stat", 4096)
        try:
            return contract_proc.parse_stat(text).ppid if text is not None else None
        except ValueError:
            return None

    # --- what the peer does ------------------------------------------------------------------------------

    def _peer(self, pid: int, now: float) -> PeerProcess:
        base = self.proc_root / str(pid)
        stat_text = _read(base / "stat", 4096)
        try:
            stat = contract_proc.parse_stat(stat_text) if stat_text is not None else None
        except ValueError:
            stat = None
        comm = printable(self.redact(stat.comm)) if stat is not None else "?"
        raw = _read(base / "cmdline", 65536) or ""
        argv = [a for a in raw.split("\0") if a]
        # A secret its argv passes under a secret-like option is hidden wherever else the same argv repeats it
        # (`--api-token T --mirror T`): argv redaction alone keeps the second.
        cmdline = printable(self.redact(scrub_text(" ".join(redact_argv(argv)), secret_values(argv=argv))))
        cmdline = cmdline[:CMDLINE_CHARS]
        now_counters = _PeerCounters(
            cpu_s=(stat.utime_ticks + stat.stime_ticks) / CLK_TCK, kernel_s=stat.stime_ticks / CLK_TCK,
            io=parse_io(_read(base / "io", 4096) or ""), at_s=now,
            wait_s=_wait_s(_read(base / "schedstat", 256))) if stat is not None else None
        before = self._cpu.get(pid)
        rates = _PeerRates()
        if now_counters is not None:
            if before is not None and now - before.at_s > 0.2:
                rates = _rates(before, now_counters)
            if before is None or now - before.at_s > 0.2:
                self._cpu[pid] = now_counters
        io = rates.io
        status = _read(base / "status", 16384) or ""
        return PeerProcess(pid=pid, comm=comm, cmdline=cmdline, state=stat.state if stat is not None else "?",
                           cpu_pct=rates.cpu_pct, top_frame=self._top_frame(pid, stat.start_time_ticks if stat else 0),
                           relation=self._relation(pid, stat.ppid if stat is not None else None),
                           kernel_pct=rates.kernel_pct, cpu_wait_pct=rates.wait_pct,
                           write_calls_per_s=io.write_calls if io else None,
                           written_bytes_per_s=io.written_bytes if io else None,
                           read_calls_per_s=io.read_calls if io else None,
                           read_bytes_per_s=io.read_bytes if io else None,
                           settings=self._settings(pid, stat.start_time_ticks if stat else 0),
                           controls=self._controls(pid, stat, status),
                           env_differs=self._env_diff(pid, stat.start_time_ticks if stat else 0),
                           limits_differ=self._limits_diff(pid, stat.start_time_ticks if stat else 0),
                           sched_differs=self._sched_diff(stat, status, now))

    def _controls(self, pid: int, stat: contract_proc.Stat | None, status: str) -> tuple[tuple[str, str], ...]:
        """What the kernel does for the peer away from its defaults, read each time (a process may set them late).
        Memory it locked once (mlockall(MCL_CURRENT) at start-up, a locked key) costs nothing later and is left
        out; memory locked as it is mapped is said: VmLck rising and falling between reads by LOCK_CHANGE_KIB or
        more is every new mapping locked and faulted in when made (MCL_FUTURE, or mlock per buffer)."""
        controls = [c for c in without_own_tracers(parse_process_controls(status), self.proc_root)
                    if c[0] != LOCKED_MEMORY]
        locked = status_fields(status).get("VmLck", "").split()
        if len(locked) == 2 and locked[0].isdigit() and locked[1] == "kB":
            key, now_kib = (pid, stat.start_time_ticks if stat is not None else 0), int(locked[0])
            low, high = self._locked.get(key, (now_kib, now_kib))
            low, high = min(low, now_kib), max(high, now_kib)
            self._locked[key] = (low, high)
            if high - low >= LOCK_CHANGE_KIB:
                controls.insert(0, (LOCKED_MEMORY, f"{now_kib / 1024:.0f} MiB now, rising and falling with its "
                                                   f"mappings ({low / 1024:.0f}-{high / 1024:.0f} MiB between reads)"))
        used_s = (stat.utime_ticks + stat.stime_ticks) / CLK_TCK if stat is not None else None
        limits = parse_cpu_time_limit(_read(self.proc_root / str(pid) / "limits", 8192) or "", used_s)
        return tuple(controls) + limits + self._cpu_quota(pid) + self._memory_limit(pid) + self._io_limit(pid)

    def _their_groups(self, pid: int, controller: str) -> tuple[int, list[Path]]:
        """(version, the peer's groups in ``controller``'s hierarchy that the watched process is not in, nearest
        first): a limit set there is the peer's own, not one the whole job shares."""
        own = self._own_groups.get(controller)
        if own is None:
            own = self._own_groups[controller] = frozenset(
                cgroup_dirs(self.pid, self.proc_root, self.cgroup_root, controller)[1])
        version, dirs = cgroup_dirs(pid, self.proc_root, self.cgroup_root, controller)
        return version, [d for d in dirs if d not in own]

    def _cpu_quota(self, pid: int) -> tuple[tuple[str, str], ...]:
        """The CPU quota of a cgroup the peer is in and the watched process is not (a container runtime's --cpus, a
        launcher's limit on one worker), where it binds: the group was throttled in PEER_THROTTLED_SHARE of its
        enforcement periods or more. The process's own groups' quota is the scheduler readings' (cgroup-cpu)."""
        version, theirs = self._their_groups(pid, "cpu")
        if not theirs:
            return ()
        cpu = read_cgroup_cpu(pid, proc_root=self.proc_root, dirs=(version, theirs))
        if not isinstance(cpu, CgroupCpu) or not isinstance(cpu.quota_cores, float) or not cpu.periods:
            return ()
        throttled = (cpu.throttled_periods or 0) / cpu.periods
        if throttled < PEER_THROTTLED_SHARE:
            return ()
        group = printable(self.redact(theirs[0].name))[:80]
        return ((CPU_QUOTA, f"of {cpu.quota_cores:.2f} CPU (cgroup `{group}`, one the process is not in): throttled "
                            f"in {100.0 * throttled:.0f}% of its {cpu.periods:,} periods"),)

    def _memory_limit(self, pid: int) -> tuple[tuple[str, str], ...]:
        """The memory limit of a cgroup the peer is in and the watched process is not (a launcher's limit on one
        helper), where it binds (``model.sched.memory_limit_binding``: between this read and the last, its charges
        met the limit often and its usage is at the limit). The page cache of the files it reads is
        charged to the group: a limit below what it reads again makes the kernel drop that cache, and each read
        go to storage. A limit it keeps under, however small, is not said."""
        version, theirs = self._their_groups(pid, "memory")
        memory = read_cgroup_memory((version, theirs)) if theirs else None
        if memory is None:
            return ()
        now = self.clock()
        before = self._memory.get(pid)
        if before is not None and now - before[0] <= 0.2:
            return before[2]  # read again within one sweep (two waits on the same peer): the same answer
        control = (memory_limit_control(before[1], memory, now - before[0], self.redact)
                   if before is not None and before[1].group == memory.group else ())
        self._memory[pid] = (now, memory, control)
        return control

    def _io_limit(self, pid: int) -> tuple[tuple[str, str], ...]:
        """A block-I/O limit of a cgroup the peer is in and the watched process is not (a batch system's cap on one
        reader), where the group ran at it between this read and the last (``model.sched.io_limit_binding``): its
        reads or writes wait in the kernel for the limit's budget, however idle the disk is."""
        version, theirs = self._their_groups(pid, "blkio")
        limits = read_cgroup_io((version, theirs)) if theirs else ()
        if not limits:
            return ()
        now = self.clock()
        history, last = self._io.get(pid, ([], ()))
        if history and now - history[-1][0] <= 0.2:
            return last  # read again within one sweep: the same answer
        # The throttle lets I/O through in slices: a rate over half a second swings about the limit. It is taken
        # from the oldest reading within IO_BASELINE_S, a second or more before where one is.
        history = [(t, x) for t, x in history if now - t <= IO_BASELINE_S]
        control: tuple[tuple[str, str], ...] = ()
        if history:
            at, previous_limits = history[0]
            old = {(x.group, x.device, x.what): x for x in previous_limits}
            for limit in limits:
                previous = old.get((limit.group, limit.device, limit.what))
                binding = io_limit_binding(previous, limit, now - at) if previous is not None else None
                if binding is not None:
                    control = ((IO_LIMIT, f"of {binding[0]} (cgroup `{printable(self.redact(limit.group))[:80]}`, "
                                          f"one the process is not in): {binding[1]}"),)
                    break
        self._io[pid] = ([*history, (now, limits)][-IO_READINGS_KEPT:], control)
        return control

    def _settings(self, pid: int, start_ticks: int) -> tuple[tuple[str, str], ...]:
        """The known settings the peer was started with away from their defaults (its environment, read once per
        process: what a launcher gave it)."""
        key = (pid, start_ticks)
        if key not in self._env:
            env = started_environ(pid, self.proc_root) or {}
            found = [(name, printable(self.redact(value))) for name, value in known_env(env)
                     if not ENV_BY_NAME[name].is_default(env.get(name, ""))]
            # The interpreter's options that set the same (`python -X dev worker.py`), where the environment does not.
            found += [(var, shown) for var, value, _ in interpreter_options(argv_of(pid, self.proc_root))
                      if var not in {n for n, _ in found} and not ENV_BY_NAME[var].is_default(value)
                      and (shown := shown_env_value(var, value)) is not None]
            self._env[key] = tuple(found)
        return self._env[key]

    def _env_diff(self, pid: int, start_ticks: int) -> tuple[str, ...]:
        """The names of the peer's environment that differ from the watched process's at start (``PeerProcess.
        env_differs``), read once per process; the catalogue's variables are its settings, and a shell's or a test
        runner's bookkeeping is left out."""
        key = (pid, start_ticks)
        if key not in self._env_differs:
            if self._own_env is None:
                self._own_env = started_environ(self.pid, self.proc_root) or {}
            theirs = started_environ(pid, self.proc_root)
            self._env_differs[key] = () if theirs is None or not self._own_env else \
                tuple(printable(self.redact(name))[:ENV_NAME_CHARS] for name in env_differences(self._own_env, theirs))
        return self._env_differs[key]

    def _sched_diff(self, stat: contract_proc.Stat | None, status: str, now: float) -> tuple[tuple[str, str, str], ...]:
        """How the scheduler runs the peer (its nice, policy and allowed CPUs, read each time: a process may renice
        or pin itself late) where it differs from the watched process's main thread (read once per read of the
        waits, whatever the number of peers)."""
        own = self._own_sched(now)
        if stat is None or own is None:
            return ()
        own_nice, own_policy, own_cpus = own
        out: list[tuple[str, str, str]] = []
        if stat.nice is not None and own_nice is not None and stat.nice != own_nice:
            out.append(("nice", str(stat.nice), str(own_nice)))
        if stat.policy is not None and own_policy is not None and stat.policy != own_policy:
            out.append(("policy", _POLICIES.get(stat.policy, str(stat.policy)), _POLICIES.get(own_policy, str(own_policy))))
        theirs_cpus = status_fields(status).get("Cpus_allowed_list", "")[:64]
        if theirs_cpus and own_cpus and theirs_cpus != own_cpus:
            out.append(("CPUs allowed", theirs_cpus, own_cpus))
        return tuple(out)

    def _own_sched(self, now: float) -> tuple[int | None, int | None, str] | None:
        """The watched process's nice, policy and allowed CPUs, read once for the reading at ``now``."""
        if self._own_sched_at is None or self._own_sched_at[0] != now:
            base = self.proc_root / str(self.pid)
            try:
                own = contract_proc.parse_stat(_read(base / "stat", 4096) or "")
            except ValueError:
                self._own_sched_at = (now, None)
            else:
                cpus = status_fields(_read(base / "status", 16384) or "").get("Cpus_allowed_list", "")[:64]
                self._own_sched_at = (now, (own.nice, own.policy, cpus))
        return self._own_sched_at[1]

    def _limits_diff(self, pid: int, start_ticks: int) -> tuple[tuple[str, str, str], ...]:
        """The peer's soft resource limits that differ from the watched process's, read once per process (a
        launcher's or a sandbox's setrlimit is made before it runs)."""
        key = (pid, start_ticks)
        if key not in self._limits_differ:
            if self._own_limits is None:
                self._own_limits = parse_limits(_read(self.proc_root / str(self.pid) / "limits", 8192) or "")
            theirs = parse_limits(_read(self.proc_root / str(pid) / "limits", 8192) or "")
            self._limits_differ[key] = limits_differences(self._own_limits, theirs)
        return self._limits_differ[key]

    def _relation(self, pid: int, ppid: int | None) -> str:
        if ppid == self.pid:
            return "child"
        own_parent = self._ppid(self.pid)
        if pid == own_parent:
            return "parent"
        if ppid is not None and ppid == own_parent:
            return "sibling"
        return "other"

    def _top_frame(self, pid: int, start_ticks: int) -> str:
        key = (pid, start_ticks)
        if key in self._frames:
            return self._frames[key]
        frame = ""
        try:
            exe = os.path.basename(os.readlink(self.proc_root / str(pid) / "exe"))
        except OSError:
            exe = ""
        if exe.startswith("python") and self.dumper is not None:
            try:
                sample = self.dumper(pid)
            except Exception:  # a peer py-spy cannot read: no frame, the rest stands
                sample = None
            frame = _busiest_frame(sample) if sample is not None else ""
        self._frames[key] = printable(self.redact(frame)) if frame else ""
        return self._frames[key]


def memory_limit_control(before: CgroupMemory, now: CgroupMemory, elapsed_s: float,
                         redact: TextRedactor = lambda s: s) -> tuple[tuple[str, str], ...]:
    """The MEMORY_LIMIT control where a group's limit binds between two of its readings ``elapsed_s`` apart:
    ``("a memory limit", "of 64 MiB (cgroup `x`, one the process is not in): ...")``; () where it does not. Pure."""
    binding = memory_limit_binding(before, now, elapsed_s)
    if binding is None:
        return ()
    return ((MEMORY_LIMIT, f"of {size_text(now.limit_bytes)} (cgroup `{printable(redact(now.group))[:80]}`, one the "
                           f"process is not in): {binding}"),)


def _busiest_frame(sample: StackSample) -> str:
    """The innermost frame of the peer's own code in its most active thread (on a CPU or holding the GIL first)."""
    threads = sorted(sample.threads, key=lambda t: (not (t.active or t.owns_gil), t.thread_id))
    stacks = [_own_frames(t.frames) for t in threads]
    for frames in stacks:
        for frame in frames:
            if not frame.native and not is_library_file(frame.filename):
                return f"{frame.name} ({frame.short_filename}:{frame.line})"
    for frames in stacks:
        for frame in frames:
            if not frame.native:
                return f"{frame.name} ({frame.short_filename}:{frame.line})"
    return ""


def _own_frames(frames: tuple[Frame, ...]) -> tuple[Frame, ...]:
    """A forked child's frames up to multiprocessing's process bootstrap: the frames outside it are its parent's
    at the fork (a manager's server would otherwise read as the parent's `manager.start()` line)."""
    for i, frame in enumerate(frames):
        if frame.name.endswith("_bootstrap") and frame.filename.endswith("multiprocessing/process.py"):
            return frames[:i + 1]
    return frames
