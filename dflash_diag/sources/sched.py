"""The scheduler's view of a process, from /proc and the cgroup file system: no probe, no ptrace.

Per sweep (:class:`SchedReader`, about once a second): each thread's voluntary and involuntary context switches
and the CPUs it may run on (``/proc/PID/task/TID/status``), the process's direct children summed over their
threads (schedstat: what they add to the demand on the cores), the cgroup's CPU quota and throttling
(``cpu.max``/``cpu.stat`` on cgroup v2, ``cpu.cfs_quota_us``/``cpu.stat`` on v1), pressure stall information
(the cgroup's ``*.pressure``, else ``/proc/pressure/*``), and the machine's runnable tasks (``/proc/stat``).
Once per window (:func:`read_os_facts`): the machine's CPUs against the process's, the known environment
variables of the process (as it was started, and as it set them since: ``sources.live_environ``) and of its
children (``dflash_contract.settings``: names from a catalogue, safe values only), and the thread-pool libraries
it maps.

Costs (``bench/sched_readers.py``, docs/benchmarks.md): a status read is tens of µs per thread, so a sweep of a
40-thread process is about a millisecond; the facts read ``maps`` and ``environ`` once.
Every reader returns what it could read: a missing file is a missing field, never an exception.
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from dflash_contract import proc as contract_proc
from dflash_contract.settings import ENV_BY_NAME, interpreter_options, known_env, shown_env_value
from dflash_diag.model.common import NA, Maybe
from dflash_diag.model.sched import (
    MAX_PROGRAM_ENV_NAMES,
    CgroupCpu,
    CgroupMemory,
    ChildSched,
    Connecting,
    EnvSetting,
    IoLimit,
    OsFacts,
    Pressure,
    ProcessIo,
    SchedSample,
    TaskSched,
    parse_cpu_list,
)
from dflash_diag.model.text import printable
from dflash_diag.sources import procfs, sock_diag
from dflash_diag.sources.live_environ import read_live_environ

PROC = Path("/proc")
SYS_CGROUP = Path("/sys/fs/cgroup")
SYS_CPU_ONLINE = Path("/sys/devices/system/cpu/online")
SYS_THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")
SYS_CLOCKSOURCE = Path("/sys/devices/system/clocksource/clocksource0/current_clocksource")
SYS_AUTOGROUP = Path("/proc/sys/kernel/sched_autogroup_enabled")
MAX_TASKS = 4096  # threads read per sweep (a process with more is read in part: bounded work)
MAX_CHILDREN = 32  # children summed per sweep
MAX_CHILD_TASKS = 256
MAX_MAPS_BYTES = 8 * 1024 * 1024
PRESSURE_RESOURCES = ("cpu", "memory", "io")
# Libraries whose presence says which thread pools (and devices) the process runs: the basename's start.
POOL_LIBRARIES = ("libgomp", "libiomp5", "libomp", "libmkl_", "libopenblas", "libtbb", "libnccl", "libcudart",
                  "libcuda.so", "libjemalloc", "libtcmalloc", "libblis", "libc_malloc_debug")


# --- parsing (pure) ---------------------------------------------------------------------------------------------


def status_fields(text: str) -> dict[str, str]:
    """A /proc status file's ``Key: value`` lines. Pure."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key] = value.strip()
    return fields


def parse_status(text: str) -> tuple[str, int, int, str] | None:
    """(Name, voluntary switches, involuntary switches, Cpus_allowed_list) from a /proc status file; None when
    the switch counts are missing (a kernel without them)."""
    fields = status_fields(text)
    try:
        vol = int(fields["voluntary_ctxt_switches"])
        invol = int(fields["nonvoluntary_ctxt_switches"])
    except (KeyError, ValueError):
        return None
    return fields.get("Name", ""), vol, invol, fields.get("Cpus_allowed_list", "")


def parse_cpu_max(text: str) -> Maybe[float]:
    """cgroup v2 ``cpu.max`` ("max 100000" or "150000 100000") -> the quota in cores, NA when unlimited."""
    parts = text.split()
    if not parts or parts[0] == "max":
        return NA("no CPU quota")
    try:
        quota, period = int(parts[0]), int(parts[1]) if len(parts) > 1 else 100_000
    except ValueError:
        return NA("cpu.max unreadable")
    return quota / period if quota > 0 and period > 0 else NA("no CPU quota")


def parse_cfs_quota(quota_text: str, period_text: str) -> Maybe[float]:
    """cgroup v1 ``cpu.cfs_quota_us`` (-1: unlimited) over ``cpu.cfs_period_us`` -> cores."""
    try:
        quota, period = int(quota_text.strip()), int(period_text.strip())
    except ValueError:
        return NA("cpu.cfs_quota_us unreadable")
    return quota / period if quota > 0 and period > 0 else NA("no CPU quota")


def parse_flat_keyed(text: str) -> dict[str, int]:
    """``key value`` lines (cpu.stat) -> {key: int}; lines that do not parse are skipped."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2:
            try:
                out[parts[0]] = int(parts[1])
            except ValueError:
                continue
    return out


def parse_pressure(text: str) -> tuple[int, int | None] | None:
    """(some total µs, full total µs or None) from a PSI file; None when there is no ``some`` line."""
    some: int | None = None
    full: int | None = None
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        match = re.search(r"\btotal=(\d+)", rest)
        if match is None:
            continue
        if kind == "some":
            some = int(match.group(1))
        elif kind == "full":
            full = int(match.group(1))
    return (some, full) if some is not None else None


def parse_cgroup_file(text: str, controller: str = "cpu") -> tuple[str | None, str | None]:
    """(the v2 path, the v1 path of ``controller``'s hierarchy) from ``/proc/PID/cgroup``."""
    v2: str | None = None
    v1: str | None = None
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            v2 = path
        elif controller in controllers.split(","):
            v1 = path
    return v2, v1


def parse_procs_running(text: str) -> int | None:
    for line in text.splitlines():
        if line.startswith("procs_running "):
            try:
                return int(line.split()[1])
            except (IndexError, ValueError):
                return None
    return None


# --- reading ----------------------------------------------------------------------------------------------------


def _read(path: Path, limit: int = 65536) -> str | None:
    try:
        with open(path, "rb") as fh:
            return fh.read(limit).decode("utf-8", errors="replace")
    except OSError:
        return None


def read_task(pid: int, tid: int, proc_root: Path = PROC) -> TaskSched | None:
    text = _read(proc_root / str(pid) / "task" / str(tid) / "status", 8192)
    parsed = parse_status(text) if text is not None else None
    if parsed is None:
        return None
    name, vol, invol, cpus = parsed
    return TaskSched(tid=tid, comm=printable(name), voluntary_switches=vol, involuntary_switches=invol,
                     cpus_allowed=cpus)


def _task_ids(pid: int, proc_root: Path) -> list[int]:
    try:
        names = os.listdir(proc_root / str(pid) / "task")
    except OSError:
        return []
    return sorted(int(n) for n in names if n.isdigit())[:MAX_TASKS]


def read_child(child: int, proc_root: Path = PROC, *, watched: int | None = None,
               ran_since_ns: int | None = None) -> ChildSched | None:
    """A child summed over its threads (schedstat), or None when it is gone. With ``watched``, the entries of that
    process's /proc directory the child holds open (``watched_entries``), read only where the child ran
    ``WATCH_RUN_NS`` or more since ``ran_since_ns`` (its on-CPU time at the sweep before; None: first seen)."""
    stat = _read(proc_root / str(child) / "stat", 4096)
    if stat is None:
        return None
    try:
        parsed = contract_proc.parse_stat(stat)
    except ValueError:
        return None
    run = wait = 0
    tids = _task_ids(child, proc_root)[:MAX_CHILD_TASKS]
    for tid in tids:
        text = _read(proc_root / str(child) / "task" / str(tid) / "schedstat", 256)
        if text is None:
            continue
        try:
            r, w = procfs.parse_schedstat(text)
        except procfs.ProcParseError:
            continue
        run += r
        wait += w
    watching: tuple[str, ...] = ()
    if watched is not None and ran_since_ns is not None and run - ran_since_ns >= WATCH_RUN_NS:
        watching = watched_entries(proc_root / str(child) / "fd", watched)
    return ChildSched(pid=child, comm=printable(parsed.comm), threads=len(tids), run_ns=run, runq_wait_ns=wait,
                      start_ticks=parsed.start_time_ticks, nice=parsed.nice, policy=parsed.policy,
                      session=parsed.session, autogroup=read_autogroup(child, proc_root),
                      user_ticks=parsed.utime_ticks, kernel_ticks=parsed.stime_ticks, watching=watching)


# A child's descriptors are looked at where it ran this long since the sweep before (a tenth of a second's sweep
# interval): an idle child's are not read each second.
WATCH_RUN_NS = 50_000_000
MAX_WATCH_FDS = 256  # a child's descriptors looked at for the watched process's /proc entries
MAX_WATCHING = 8
_PROC_ENTRY = re.compile(r"^/proc/(\d{1,7})/(?:task/\d{1,7}/)?([a-z_]{1,32})$")


def watched_entries(fd_dir: Path, watched: int) -> tuple[str, ...]:
    """The entries of ``/proc/<watched>/`` (or of one of its threads, ``task/stat``) that the descriptors in
    ``fd_dir`` are open on, sorted, at most ``MAX_WATCHING``; () where none or not ours to read."""
    found: set[str] = set()
    try:
        for _fd, target in procfs.fd_links(fd_dir, MAX_WATCH_FDS):
            match = _PROC_ENTRY.match(target)
            if match is not None and int(match[1]) == watched:
                found.add(("task/" if "/task/" in target else "") + match[2])
    except OSError:
        return ()
    return tuple(sorted(found))[:MAX_WATCHING]


_AUTOGROUP = re.compile(r"/(autogroup-\d{1,12})\b")
DEFAULT_AUTOGROUP = "autogroup-0"  # the kernel's own id for its default group, which it never prints


def read_autogroup(pid: int, proc_root: Path = PROC) -> str:
    """The process's autogroup ("autogroup-812", from /proc/PID/autogroup: "/autogroup-812 nice 0"); "autogroup-0"
    where the file reads empty: the kernel prints nothing for its default group, the one init's session is in and
    every session that never called setsid since (a CI runner's often is); "" where the kernel has none or the file
    is not ours to read."""
    text = _read(proc_root / str(pid) / "autogroup", 128)
    if text is not None and not text.strip():
        return DEFAULT_AUTOGROUP
    match = _AUTOGROUP.match(text or "")
    return match.group(1) if match else ""


def read_autogroup_enabled(path: Path) -> bool | None:
    """kernel.sched_autogroup_enabled: True, False, or None where the kernel has no such setting."""
    text = (_read(path, 16) or "").strip()
    return None if text not in ("0", "1") else text == "1"


def read_session(pid: int, proc_root: Path = PROC) -> int | None:
    stat = _read(proc_root / str(pid) / "stat", 4096)
    try:
        return contract_proc.parse_stat(stat).session if stat is not None else None
    except ValueError:
        return None


# Where a v1 controller's hierarchy is mounted under /sys/fs/cgroup, by the names distributions give it.
_V1_MOUNTS = {"cpu": ("cpu,cpuacct", "cpu", "cpuacct,cpu"), "memory": ("memory",), "blkio": ("blkio",)}


def cgroup_dirs(pid: int, proc_root: Path, cgroup_root: Path, controller: str = "cpu") -> tuple[int, list[Path]]:
    """(version, the process's group directory and its ancestors up to the mount, nearest first), in the hierarchy
    that has ``controller`` ("cpu", "memory" or "blkio")."""
    text = _read(proc_root / str(pid) / "cgroup", 16384) or ""
    v2, v1 = parse_cgroup_file(text, controller)
    candidates: list[tuple[int, Path, str]] = []
    if v1 is not None:
        for name in _V1_MOUNTS[controller]:
            if (cgroup_root / name).is_dir():
                candidates.append((1, cgroup_root / name, v1))
                break
    if v2 is not None and (cgroup_root / "cgroup.controllers").exists():
        candidates.insert(0, (2, cgroup_root, v2))
    elif v2 is not None and (cgroup_root / "unified" / "cgroup.controllers").exists() and not candidates:
        candidates.append((2, cgroup_root / "unified", v2))
    for version, mount, path in candidates:
        group = mount / path.lstrip("/")
        # Inside a container's cgroup namespace the path the kernel shows may not exist under our mount: the
        # namespace's root is the mount itself.
        if not group.is_dir():
            group = mount
        dirs = [group]
        while dirs[-1] != mount and mount in dirs[-1].parents:
            dirs.append(dirs[-1].parent)
        return version, dirs
    return 0, []


def read_cgroup_cpu(pid: int, *, proc_root: Path = PROC, cgroup_root: Path = SYS_CGROUP,
                    dirs: tuple[int, list[Path]] | None = None) -> Maybe[CgroupCpu]:
    """The CPU quota that binds the process (the smallest of its group and its ancestors) and its group's
    throttling counters; NA when no CPU controller is visible. ``dirs``: ``cgroup_dirs``' answer, when known."""
    version, dirs_ = dirs if dirs is not None else cgroup_dirs(pid, proc_root, cgroup_root)
    dirs = dirs_
    if not dirs:
        return NA("no cgroup CPU controller visible")
    quotas: list[float] = []
    stat: dict[str, int] = {}
    for d in dirs:
        if version == 2:
            text = _read(d / "cpu.max", 256)
            quota = parse_cpu_max(text) if text is not None else NA("no cpu.max")
        else:
            q, p = _read(d / "cpu.cfs_quota_us", 64), _read(d / "cpu.cfs_period_us", 64)
            quota = parse_cfs_quota(q, p) if q is not None and p is not None else NA("no quota file")
        if isinstance(quota, float):
            quotas.append(quota)
        if not stat:
            text = _read(d / "cpu.stat", 4096)
            parsed = parse_flat_keyed(text) if text is not None else {}
            if "nr_periods" in parsed:
                stat = parsed
    throttled_us = stat.get("throttled_usec")
    if throttled_us is None and "throttled_time" in stat:
        throttled_us = stat["throttled_time"] // 1000  # v1 counts nanoseconds
    return CgroupCpu(version=version, quota_cores=min(quotas) if quotas else NA("no CPU quota"),
                     periods=stat.get("nr_periods"), throttled_periods=stat.get("nr_throttled"),
                     throttled_us=throttled_us)


# A v1 memory limit this large, or larger, is no limit ("unlimited" is the largest page-aligned long).
_V1_UNLIMITED_BYTES = 1 << 60


def _memory_limit(text: str | None, version: int) -> int | None:
    """A finite memory limit from ``memory.max``/``memory.high`` ("max", "67108864") or v1
    ``memory.limit_in_bytes``; None when unlimited or unreadable."""
    value = (text or "").strip()
    if not value.isdigit():
        return None
    limit = int(value)
    return None if version == 1 and limit >= _V1_UNLIMITED_BYTES else limit


def read_cgroup_memory(dirs: tuple[int, list[Path]]) -> CgroupMemory | None:
    """The memory limit of a group (``cgroup_dirs(..., "memory")``' answer: the group and its ancestors) with the
    nearest group's counters; None where no ancestor sets a finite limit or the controller is not visible."""
    version, groups = dirs
    if not groups:
        return None
    names = ("memory.max", "memory.high") if version == 2 else ("memory.limit_in_bytes",)
    limits = [limit for d in groups for name in names
              if (limit := _memory_limit(_read(d / name, 64), version)) is not None]
    if not limits:
        return None
    group = groups[0]
    usage_text = _read(group / ("memory.current" if version == 2 else "memory.usage_in_bytes"), 64)
    usage = int(usage_text.strip()) if usage_text is not None and usage_text.strip().isdigit() else None
    stat = parse_flat_keyed(_read(group / "memory.stat", 16384) or "")
    if version == 2:
        events = parse_flat_keyed(_read(group / "memory.events", 1024) or "")
        hits = events["max"] + events.get("high", 0) if "max" in events else None
        pages_in = stat.get("workingset_refault_file", stat.get("workingset_refault"))
    else:
        text = _read(group / "memory.failcnt", 64)
        hits = int(text.strip()) if text is not None and text.strip().isdigit() else None
        pages_in = stat.get("pgpgin")
    return CgroupMemory(version=version, group=group.name, limit_bytes=min(limits), usage_bytes=usage,
                        limit_hits=hits, pages_in=pages_in, pages_in_are_refaults=version == 2)


_V1_IO_LIMITS = (("blkio.throttle.read_bps_device", "read bytes", "blkio.throttle.io_service_bytes", "Read"),
                 ("blkio.throttle.write_bps_device", "write bytes", "blkio.throttle.io_service_bytes", "Write"),
                 ("blkio.throttle.read_iops_device", "read ops", "blkio.throttle.io_serviced", "Read"),
                 ("blkio.throttle.write_iops_device", "write ops", "blkio.throttle.io_serviced", "Write"))
_V2_IO_LIMITS = (("rbps", "read bytes", "rbytes"), ("wbps", "write bytes", "wbytes"), ("riops", "read ops", "rios"),
                 ("wiops", "write ops", "wios"))


def read_cgroup_io(dirs: tuple[int, list[Path]]) -> tuple[IoLimit, ...]:
    """Every finite block-I/O limit set on the groups in ``dirs`` (``cgroup_dirs(..., "blkio")``' answer, less the
    groups not wanted), with the count it caps in that group; () where none is set."""
    version, groups = dirs
    out: list[IoLimit] = []
    for group in groups:
        if version == 2:
            stat = _device_fields(_read(group / "io.stat", 16384) or "")
            for line in (_read(group / "io.max", 4096) or "").splitlines():
                device, *fields = line.split()
                values = dict(f.split("=", 1) for f in fields if "=" in f)
                for key, what, counter in _V2_IO_LIMITS:
                    if values.get(key, "max").isdigit():
                        out.append(IoLimit(group.name, device, what, int(values[key]),
                                           stat.get(device, {}).get(counter, 0)))
            continue
        for limit_file, what, counter_file, column in _V1_IO_LIMITS:
            text = _read(group / limit_file, 4096) or ""
            if not text.strip():
                continue
            counts = _v1_counts(_read(group / counter_file, 65536) or "", column)
            for line in text.splitlines():
                parts = line.split()
                if len(parts) == 2 and parts[1].isdigit():
                    out.append(IoLimit(group.name, parts[0], what, int(parts[1]), counts.get(parts[0], 0)))
    return tuple(out)


def _device_fields(text: str) -> dict[str, dict[str, int]]:
    """io.stat ("254:0 rbytes=1 wbytes=2 rios=3 wios=4 ...") -> {device: {field: value}}."""
    out: dict[str, dict[str, int]] = {}
    for line in text.splitlines():
        device, *fields = line.split()
        out[device] = {k: int(v) for k, v in (f.split("=", 1) for f in fields if "=" in f) if v.isdigit()}
    return out


def _v1_counts(text: str, column: str) -> dict[str, int]:
    """blkio.throttle.io_service_bytes ("254:0 Read 653295616") -> {device: the column's count}."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] == column and parts[2].isdigit():
            out[parts[0]] = int(parts[2])
    return out


def read_pressure(pid: int, *, proc_root: Path = PROC, cgroup_root: Path = SYS_CGROUP,
                  dirs: tuple[int, list[Path]] | None = None) -> tuple[Pressure, ...]:
    """PSI of cpu, memory and io: the process's cgroup's (v2) where the kernel keeps it, else the system's."""
    version, dirs_ = dirs if dirs is not None else cgroup_dirs(pid, proc_root, cgroup_root)
    dirs = dirs_
    out: list[Pressure] = []
    for resource in PRESSURE_RESOURCES:
        found = None
        if version == 2 and dirs and dirs[0] != cgroup_root:
            text = _read(dirs[0] / f"{resource}.pressure", 1024)
            parsed = parse_pressure(text) if text is not None else None
            if parsed is not None:
                found = Pressure(resource=resource, scope="cgroup", some_us=parsed[0], full_us=parsed[1])
        if found is None:
            text = _read(proc_root / "pressure" / resource, 1024)
            parsed = parse_pressure(text) if text is not None else None
            if parsed is not None:
                found = Pressure(resource=resource, scope="system", some_us=parsed[0], full_us=parsed[1])
        if found is not None:
            out.append(found)
    return tuple(out)


class SchedReader:
    """One sweep of the scheduler's view of ``pid``. Which cgroup files exist is found once; the rest is read each
    sweep."""

    def __init__(self, pid: int, *, proc_root: Path = PROC, cgroup_root: Path = SYS_CGROUP,
                 clock: Callable[[], float] = time.monotonic,
                 children: Callable[[int], tuple[int, ...]] | None = None) -> None:
        self.pid = pid
        self.proc_root = proc_root
        self.cgroup_root = cgroup_root
        self.clock = clock
        self._children = children or procfs.all_children
        self._dirs: tuple[int, list[Path]] | None = None  # the cgroup's directories: found once
        self._memory_dirs: tuple[int, list[Path]] | None = None  # ... in the memory controller's hierarchy
        self._ran: dict[int, int] = {}  # each child's on-CPU ns at the sweep before
        self._overflows: int | None = None  # the namespace's ListenOverflows at the sweep before
        self._own_namespace: bool | None = None  # the process shares this one's network namespace (asked once)

    def __call__(self, pid: int | None = None) -> SchedSample:
        return self.sample()

    def sample(self) -> SchedSample:
        pid = self.pid
        tasks = tuple(t for t in (read_task(pid, tid, self.proc_root) for tid in _task_ids(pid, self.proc_root))
                      if t is not None)
        listed = self._children(pid)
        children = tuple(c for c in (read_child(c, self.proc_root, watched=pid, ran_since_ns=self._ran.get(c))
                                     for c in listed[:MAX_CHILDREN]) if c is not None)
        self._ran = {c.pid: c.run_ns for c in children}
        stat = _read(self.proc_root / "stat", 1 << 20)
        if self._dirs is None:
            self._dirs = cgroup_dirs(pid, self.proc_root, self.cgroup_root)
            self._memory_dirs = cgroup_dirs(pid, self.proc_root, self.cgroup_root, "memory")
        overflows = parse_listen_overflows(_read(self.proc_root / str(pid) / "net" / "netstat", 1 << 16) or "")
        connecting = self._connecting(pid, listed, overflows)
        self._overflows = overflows
        return SchedSample(
            monotonic_s=self.clock(), tasks=tasks, children=children,
            cgroup=read_cgroup_cpu(pid, proc_root=self.proc_root, cgroup_root=self.cgroup_root, dirs=self._dirs),
            pressure=read_pressure(pid, proc_root=self.proc_root, cgroup_root=self.cgroup_root, dirs=self._dirs),
            procs_running=parse_procs_running(stat) if stat is not None else None,
            cgroup_memory=read_cgroup_memory(self._memory_dirs) if self._memory_dirs else None,
            children_listed=len(listed),
            io=parse_io(_read(self.proc_root / str(pid) / "io", 4096) or ""),
            connecting=connecting, listen_overflows=overflows,
        )

    def _connecting(self, pid: int, children: tuple[int, ...], overflows: int | None) -> tuple[Connecting, ...]:
        """The process's connections still opening (``read_connecting``), looked for only in a sweep after the
        namespace's kernel refused a connection at a full accept queue (its counter rose): one small dump then,
        nothing otherwise."""
        if overflows is None or self._overflows is None or overflows <= self._overflows:
            return ()
        if self._own_namespace is None:
            self._own_namespace = self.proc_root == PROC and sock_diag.same_network_namespace(pid)
        if not self._own_namespace:
            return ()
        return read_connecting(pid, children, self.proc_root)


# --- connections still opening, and the listener that refuses them -----------------------------------------------

MAX_CONNECTING = 4  # endpoints kept per sweep, most sockets first
MAX_LISTENER_HOLDERS = 16  # children whose descriptors are looked at for a listener the process does not hold


def parse_listen_overflows(text: str) -> int | None:
    """TcpExt's ListenOverflows of ``/proc/PID/net/netstat`` (pairs of lines: the group's names, then its values):
    the connections the namespace's kernel refused because a listener's accept queue was full. None where absent."""
    lines = text.splitlines()
    for names, values in zip(lines[::2], lines[1::2], strict=False):
        keys, vals = names.split(), values.split()
        if keys[:1] == ["TcpExt:"] and vals[:1] == ["TcpExt:"] and len(keys) == len(vals) and \
                "ListenOverflows" in keys:
            value = vals[keys.index("ListenOverflows")]
            return int(value) if value.isdigit() else None
    return None


def read_connecting(pid: int, children: tuple[int, ...], proc_root: Path = PROC,
                    entries: Callable[[], list[sock_diag.TcpEntry] | None] = sock_diag.opening_and_listening,
                    ) -> tuple[Connecting, ...]:
    """The process's TCP sockets still opening a connection (SYN_SENT), per endpoint, with the socket listening
    there on this machine (its accept queue and backlog) and the process holding it, looked for among the process
    and its children. From the kernel's socket diagnostics (``entries``: this namespace's opening and listening
    sockets) and the descriptors' links; () where none."""
    table = entries() or []
    opening = [e for e in table if e.state == sock_diag.TCP_SYN_SENT]
    if not opening:
        return ()
    own = _socket_inodes(descriptor_links(pid, proc_root))  # the process's own sockets, read once
    by_remote: dict[str, list[sock_diag.TcpEntry]] = {}
    for e in opening:
        if e.inode in own:
            by_remote.setdefault(e.remote, []).append(e)
    listeners = [e for e in table if e.state == sock_diag.TCP_LISTEN]
    out = []
    for remote, socks in sorted(by_remote.items(), key=lambda kv: -len(kv[1]))[:MAX_CONNECTING]:
        listener = _listener_for(remote, listeners)
        holder = None
        if listener is not None:
            holder = pid if listener.inode in own else _holder(f"socket:[{listener.inode}]", children, proc_root)
        out.append(Connecting(remote=tcp_addr_text(remote), sockets=len(socks),
                              retransmits=max(e.retransmits for e in socks), listener_pid=holder,
                              accept_queue=listener.rqueue if listener else None,
                              backlog=listener.wqueue if listener else None))
    return tuple(out)


def _listener_for(remote: str, listeners: list[sock_diag.TcpEntry]) -> sock_diag.TcpEntry | None:
    """The listening socket a connection to ``remote`` reaches: the same port, on that address or on all."""
    host, _, port = remote.rpartition(":")
    for e in listeners:
        local_host, _, local_port = e.local.rpartition(":")
        if local_port == port and (local_host == host or not local_host.strip("0")):
            return e
    return None


def _holder(link: str, pids: tuple[int, ...], proc_root: Path) -> int | None:
    for pid in pids[:MAX_LISTENER_HOLDERS]:
        if any(target == link for _, target in descriptor_links(pid, proc_root) or ()):
            return pid
    return None


# --- once per window ------------------------------------------------------------------------------------------


def machine_cpus(online: Path = SYS_CPU_ONLINE) -> int:
    text = _read(online, 4096)
    cpus = parse_cpu_list(text) if text is not None else frozenset()
    return len(cpus) or (os.cpu_count() or 1)


def mapped_libraries(pid: int, proc_root: Path = PROC) -> tuple[str, ...]:
    """The thread-pool and device libraries the process maps (``libgomp``, ``libmkl_``...), by name."""
    text = _read(proc_root / str(pid) / "maps", MAX_MAPS_BYTES)
    if text is None:
        return ()
    found: dict[str, None] = {}
    for line in text.splitlines():
        path = line.rsplit(" ", 1)[-1]
        base = path.rsplit("/", 1)[-1]
        for lib in POOL_LIBRARIES:
            if base.startswith(lib):
                found.setdefault(lib.rstrip("_").removesuffix(".so"), None)
    return tuple(found)


def read_os_facts(pid: int, *, proc_root: Path = PROC, online: Path = SYS_CPU_ONLINE,
                  children: Callable[[int], tuple[int, ...]] | None = None, thp: Path = SYS_THP,
                  clocksource: Path = SYS_CLOCKSOURCE, autogroup_setting: Path = SYS_AUTOGROUP) -> OsFacts:
    """The machine's CPUs and the process's, the known environment of the process (and what only its children
    have), and the pool libraries it maps. Never raises for a process that is gone: fields read as unknown."""
    status = _read(proc_root / str(pid) / "status", 16384) or ""
    parsed = parse_status(status)
    cpus_text = parsed[3] if parsed is not None else ""
    env, set_by_program = _env_of(pid, proc_root)
    kids = (children or procfs.all_children)(pid)[:MAX_CHILDREN]
    kids_env = _each_childs_env(kids, proc_root)
    if isinstance(env, tuple):
        env = env + _children_only_env(kids_env, {e.name for e in env})
    exe = ""
    try:
        exe = os.readlink(proc_root / str(pid) / "exe")
    except OSError:
        pass
    version = re.search(r"python(\d+\.\d+)", exe.rsplit("/", 1)[-1])
    links = descriptor_links(pid, proc_root)  # one walk of the descriptors for both of their readers
    return OsFacts(machine_cpus=machine_cpus(online), process_cpus=cpus_text,
                   process_cpu_count=len(parse_cpu_list(cpus_text)), env=env,
                   libraries=mapped_libraries(pid, proc_root), python_version=version.group(1) if version else "",
                   children_env=kids_env, thp_mode=parse_thp_mode(_read(thp, 256) or ""),
                   clocksource=parse_clocksource(_read(clocksource, 256) or ""),
                   timerslack_ns=parse_timerslack(_read(proc_root / str(pid) / "timerslack_ns", 64) or ""),
                   sync_files=open_sync_files(pid, proc_root, links),
                   controls=without_own_tracers(parse_process_controls(status), proc_root)
                   + cpu_time_limit(pid, proc_root),
                   watches=file_watches(pid, proc_root, links) + children_permission_watches(pid, kids, proc_root,
                                                                                             links),
                   read_call_us=read_call_cost_us(),
                   closed_connections=closed_connections(pid, proc_root, links, kids),
                   autogroup_enabled=read_autogroup_enabled(autogroup_setting), session=read_session(pid, proc_root),
                   autogroup=read_autogroup(pid, proc_root), env_set_by_program=set_by_program)


MAX_TCP_TABLE_BYTES = 1 << 20  # the peers' reads (twice a second): a namespace's /proc/net/tcp, this much at most
# The facts' read, once a window: a client opening 500 connections a second keeps 30,000 in TIME_WAIT (~150 bytes a
# line; 3 MB read in 28 ms and parsed in 31 ms here), and its own connection may be the table's last line.
MAX_TCP_FACTS_BYTES = 16 << 20
TIME_WAIT_MIN = 100  # connections to one endpoint closed in the last minute: about two a second or more
_TCP_ESTABLISHED, _TCP_TIME_WAIT, _TCP_LISTEN = "01", "06", "0A"


def closed_connections(pid: int, proc_root: Path = PROC, links: Links | None = None,
                       children: tuple[int, ...] = (),
                       established: Callable[[set[str]], set[str] | None] | None = None) -> tuple[tuple[str, int], ...]:
    """Endpoints the process holds a TCP connection to, or that it or its children listen on (a service of its own,
    which a client without keep-alive is connected to only while a request lasts), with the connections to them in
    TIME_WAIT in its network namespace (``/proc/PID/net/tcp``, ``tcp6``): the side that closes a connection keeps
    it there for 60 s, so the count is the connections closed over the last minute. Those with TIME_WAIT_MIN or
    more, most first.

    The table's walk over thousands of TIME_WAIT lines takes tens of milliseconds, and a client that opens a
    connection per request has closed the one its descriptors named by the time its line is printed: where
    endpoints have enough closed connections, the process's sockets are looked up again among the established ones
    alone (``established``: the kernel's socket diagnostics, in a shared network namespace), right after its
    descriptors are read again, up to CLOSED_READS times."""
    theirs = {link[8:-1] for child in children for _, link in descriptor_links(child, proc_root) or ()
              if link.startswith("socket:[")}
    own = _socket_inodes(links)
    waits, remotes = _tcp_waits_and_remotes(pid, proc_root, own, theirs)
    many = {r for r, n in waits.items() if n >= TIME_WAIT_MIN}
    if many and not many & remotes:
        if established is None and proc_root == PROC and sock_diag.same_network_namespace(pid):
            established = sock_diag.established_remotes
        if established is not None:
            for _ in range(CLOSED_READS):
                now = established(_socket_inodes(descriptor_links(pid, proc_root)))
                remotes |= now or set()
                if now is None or many & remotes:
                    break
    return tuple((tcp_addr_text(r), n) for r, n in waits.most_common() if n >= TIME_WAIT_MIN and r in remotes)[:3]


def _socket_inodes(links: Links | None) -> set[str]:
    return {link[8:-1] for _, link in links or () if link.startswith("socket:[")}


CLOSED_READS = 3


def _tcp_waits_and_remotes(pid: int, proc_root: Path, own: set[str],
                           theirs: set[str]) -> tuple[Counter[str], set[str]]:
    """Connections in TIME_WAIT per endpoint, and the endpoints the sockets ``own`` are connected to or ``theirs``
    listen on, from one read of the process's TCP tables."""
    waits: Counter[str] = Counter()
    remotes: set[str] = set()
    for name in ("tcp", "tcp6"):
        for local, remote, state, inode in parse_tcp_lines(_read(proc_root / str(pid) / "net" / name,
                                                                 MAX_TCP_FACTS_BYTES) or ""):
            if state == _TCP_TIME_WAIT:
                # Whichever side closed first keeps it: the client (its remote is the endpoint) or, on this
                # machine, the server (its local address is).
                waits[remote] += 1
                waits[local] += 1
            elif state == _TCP_ESTABLISHED and inode in own:
                remotes.add(remote)
            elif state == _TCP_LISTEN and (inode in theirs or inode in own):
                remotes.add(local)  # a service of the process's or its children's: its clients connect per request
    return waits, remotes


def parse_tcp_lines(text: str) -> list[tuple[str, str, str, str]]:
    """(local, remote, state, inode) of each line of ``/proc/net/tcp`` or ``tcp6``, as the kernel writes them (hex
    ``ADDR:PORT``, the state's two hex digits, the inode's decimal). Pure."""
    out = []
    for line in text.splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 10 and ":" in parts[1] and ":" in parts[2] and len(parts[3]) == 2:
            out.append((parts[1], parts[2], parts[3].upper(), parts[9]))
    return out


def tcp_addr_text(addr: str) -> str:
    """``0100007F:1F90`` -> ``127.0.0.1:8080`` (IPv4 in the kernel's byte order); IPv6 as ``[v6]:8080``. Pure."""
    host, _, port = addr.partition(":")
    try:
        port_n = int(port, 16)
        if len(host) == 8:
            raw = int(host, 16).to_bytes(4, "little")
            return f"{'.'.join(str(b) for b in raw)}:{port_n}"
        return f"[v6]:{port_n}"
    except ValueError:
        return addr


MAX_FDS_SCANNED = 512  # descriptors whose flags are read, at most (a process with thousands open: the first ones)
MAX_SYNC_FILES = 8
# The open flags that make a write wait for the storage, with their names (os's values: this machine's).
_SYNC_FLAGS = tuple((flag, name) for flag, name in ((getattr(os, "O_SYNC", 0), "O_SYNC"),
                                                    (getattr(os, "O_DSYNC", 0), "O_DSYNC"),
                                                    (getattr(os, "O_DIRECT", 0), "O_DIRECT")) if flag)


Links = list[tuple[str, str]]


def descriptor_links(pid: int, proc_root: Path = PROC) -> Links | None:
    """(descriptor, its link) of the process's first ``MAX_FDS_SCANNED`` descriptors: one walk of ``/proc/PID/fd``
    for every reader of them (the synchronous files, the watches); None when not ours to read."""
    try:
        return list(procfs.fd_links(proc_root / str(pid) / "fd", MAX_FDS_SCANNED))
    except OSError:
        return None


def _regular(links: Links) -> Links:
    """The descriptors that are files on a disk (not a device, /proc or /sys, a pipe, a socket, an anon inode)."""
    return [(fd, t) for fd, t in links if t.startswith("/") and not t.startswith(("/dev/", "/proc/", "/sys/"))]


def open_sync_files(pid: int, proc_root: Path = PROC, links: Links | None = None) -> tuple[str, ...]:
    """The regular files the process holds open with O_SYNC, O_DSYNC or O_DIRECT, as "name (FLAG)": from each open
    file's ``fdinfo`` flags (octal). ``links``: :func:`descriptor_links`, read here when not given. Bounded; () when
    not ours to read."""
    links = descriptor_links(pid, proc_root) if links is None else links
    if not links:
        return ()
    base = proc_root / str(pid)
    found: list[str] = []
    for fd, target in _regular(links):
        flags = parse_fdinfo_flags(_read(base / "fdinfo" / fd, 1024) or "")
        named = sync_flag_name(flags) if flags is not None else ""
        if not named:
            continue
        entry = f"{target.rsplit('/', 1)[-1][:80]} ({named})"
        if entry not in found:
            found.append(entry)
        if len(found) >= MAX_SYNC_FILES:
            break
    return tuple(found)


# inotify's and fanotify's events that fire per system call on a watched file (a read, an open, a close, a write),
# by bit: the same values in both (fanotify's permission events make the call wait for the listener's answer).
_PER_CALL_EVENTS = ((0x1, "ACCESS"), (0x2, "MODIFY"), (0x8, "CLOSE_WRITE"), (0x10, "CLOSE_NOWRITE"), (0x20, "OPEN"),
                    (0x10000, "OPEN_PERM"), (0x20000, "ACCESS_PERM"))
_WATCH_LINE = re.compile(r"^(inotify|fanotify) .*?\bino:([0-9a-f]+).*?\bmask:([0-9a-f]+)", re.M)
MAX_WATCHES = 8
MAX_FILES_STATTED = 64


def parse_watches(text: str) -> list[tuple[str, int, int]]:
    """(inotify or fanotify, inode, event mask) of each watch an fdinfo file lists. Pure."""
    out = []
    for kind, ino, mask in _WATCH_LINE.findall(text[:65536]):
        out.append((kind, int(ino, 16), int(mask, 16)))
    return out


def per_call_events(kind: str, mask: int) -> str:
    """The events of ``mask`` that fire per system call, ``IN_ACCESS|IN_OPEN`` (``FAN_`` for fanotify); "" when
    none does. Pure."""
    prefix = "IN_" if kind == "inotify" else "FAN_"
    return "|".join(prefix + name for bit, name in _PER_CALL_EVENTS if mask & bit and (kind == "fanotify" or bit < 0x100))


def file_watches(pid: int, proc_root: Path = PROC, links: Links | None = None) -> tuple[str, ...]:
    """The process's own inotify and fanotify watches whose events fire per read, open or write, as "inotify on the
    directory of gauges.bin: IN_ACCESS|IN_OPEN": each watch's inode matched to the files the process holds open
    (or their directories), by file name only. ``links``: :func:`descriptor_links`, read here when not given.
    Bounded; () when not ours to read."""
    base = proc_root / str(pid)
    links = descriptor_links(pid, proc_root) if links is None else links
    if not links:
        return ()
    watches = [w for fd, target in links if target in ("anon_inode:inotify", "anon_inode:[fanotify]")
               for w in parse_watches(_read(base / "fdinfo" / fd, 65536) or "")]
    watches = [(kind, ino, events) for kind, ino, mask in watches if (events := per_call_events(kind, mask))]
    if not watches:
        return ()
    names = _inode_names(base, _regular(links))
    out = []
    for kind, ino, events in watches[:MAX_WATCHES]:
        entry = f"{kind} on {names.get(ino, f'inode {ino}')}: {events}"
        if entry not in out:
            out.append(entry)
    return tuple(out)


MAX_CHILDREN_WATCHED = 8  # children whose descriptors are walked for permission watches, once a window


def children_permission_watches(pid: int, kids: list[int] | tuple[int, ...], proc_root: Path = PROC,
                                links: Links | None = None) -> tuple[str, ...]:
    """The fanotify permission watches the process's children hold (a scanner, an access auditor): every open or
    read of a watched file, by any process, waits in the kernel until the child answers. As "fanotify on the
    directory of spool.bin, held by its child 4312 (`python`): FAN_OPEN_PERM": the inode named from the process's
    own open files first, then the child's. Notifications that do not wait are the child's own business. Bounded;
    () where none, or where the children's descriptors are not ours to read."""
    found: list[tuple[int, int, str]] = []
    kid_links: dict[int, Links] = {}
    for kid in kids[:MAX_CHILDREN_WATCHED]:
        kid_links[kid] = descriptor_links(kid, proc_root) or []
        for fd, target in kid_links[kid]:
            if target != "anon_inode:[fanotify]":
                continue
            for kind, ino, mask in parse_watches(_read(proc_root / str(kid) / "fdinfo" / fd, 65536) or ""):
                events = "|".join(e for e in per_call_events(kind, mask).split("|") if e.endswith("_PERM"))
                if events:
                    found.append((kid, ino, events))
    if not found:
        return ()
    own_names = _inode_names(proc_root / str(pid), _regular(links or []))
    out: list[str] = []
    for kid, ino, events in found[:MAX_WATCHES]:
        name = own_names.get(ino) or _inode_names(proc_root / str(kid), _regular(kid_links[kid])).get(ino)
        entry = f"fanotify on {name or f'inode {ino}'}, held by its child {kid} (`{_comm(kid, proc_root) or '?'}`): {events}"
        if entry not in out:
            out.append(entry)
    return tuple(out)


def _inode_names(base: Path, files: list[tuple[str, str]]) -> dict[int, str]:
    """Inode -> what to call it, for the open files and their directories ("gauges.bin", "the directory of
    gauges.bin")."""
    names: dict[int, str] = {}
    for fd, target in files[:MAX_FILES_STATTED]:
        name = target.rsplit("/", 1)[-1][:80]
        try:
            names.setdefault(os.stat(base / "fd" / fd).st_ino, name)
            parent = os.stat(base / "root" / target.rsplit("/", 1)[0].lstrip("/"))
        except OSError:
            continue
        names.setdefault(parent.st_ino, f"the directory of {name}")
    return names


def parse_fdinfo_flags(text: str) -> int | None:
    """The ``flags:`` field of an fdinfo file (octal); None when absent. Pure."""
    for line in text.splitlines()[:8]:
        name, _, value = line.partition(":")
        if name.strip() == "flags":
            try:
                return int(value.strip(), 8)
            except ValueError:
                return None
    return None


def sync_flag_name(flags: int) -> str:
    """The strongest synchronous-write flag set in ``flags`` ("O_SYNC" includes O_DSYNC's bit), "" for none. Pure."""
    for flag, name in _SYNC_FLAGS:
        if flags & flag == flag:
            return name
    return ""


# The kernel's words for a speculation control the process (or its parent) asked for with prctl: the defaults read
# "vulnerable", "not vulnerable", "globally mitigated", "conditional enabled", "always enabled"...
_FORCED_SPECULATION = ("thread mitigated", "thread force mitigated", "force disabled", "conditional disabled")


READ_CALLS_TIMED = 400  # per batch; three batches, the fastest kept: ~1 ms on this box


def read_call_cost_us(path: str | None = None) -> float | None:
    """What one small ``pread`` of a file in the page cache costs this process, in microseconds: the fastest of three
    batches (a preempted batch only overstates it). The file read is this module's own source (read-only, cached
    by the import). None where it cannot be opened."""
    try:
        fd = os.open(path or __file__, os.O_RDONLY)
    except OSError:
        return None
    try:
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            for _ in range(READ_CALLS_TIMED):
                os.pread(fd, 64, 0)
            best = min(best, (time.perf_counter() - t0) / READ_CALLS_TIMED)
    except OSError:
        return None
    finally:
        os.close(fd)
    return round(best * 1e6, 3)


def parse_process_controls(text: str) -> tuple[tuple[str, str], ...]:
    """What a /proc status file says the kernel does for the process away from its defaults: seccomp (mode 1
    "strict", or the number of filters of mode 2, each run on every system call), memory it locked (``VmLck``:
    mlock, mlockall), transparent huge pages disabled for it (``THP_enabled: 0``, prctl PR_SET_THP_DISABLE), speculation mitigations it forced on. Pure."""
    fields = status_fields(text)
    out: list[tuple[str, str]] = []
    mode, filters = fields.get("Seccomp"), fields.get("Seccomp_filters", "")
    if mode == "1":
        out.append(("seccomp", "strict"))
    elif mode == "2":
        out.append(("seccomp filters", filters if filters.isdigit() else "1 or more"))
    locked = fields.get("VmLck", "").split()
    if len(locked) == 2 and locked[0].isdigit() and int(locked[0]) > 0 and locked[1] == "kB":
        out.append((LOCKED_MEMORY, f"{int(locked[0]) / 1024:.0f} MiB"))
    if fields.get("THP_enabled") == "0":
        out.append(("transparent huge pages", "disabled for the process"))
    for key, name in (("Speculation_Store_Bypass", "speculative store bypass"),
                      ("SpeculationIndirectBranch", "indirect branch speculation")):
        value = fields.get(key, "")[:64]
        if any(word in value for word in _FORCED_SPECULATION) and value.replace(" ", "").isalpha():
            out.append((name, value))
    tracer = fields.get("TracerPid", "0")
    if tracer.isdigit() and int(tracer) > 0:
        out.append((PTRACE_TRACER, f"process {int(tracer)}"))
    return tuple(out)


LOCKED_MEMORY = "locked memory"  # the control's name: status' VmLck (mlock, mlockall)
CPU_TIME_LIMIT = "a CPU-time limit"  # the control's name: /proc/PID/limits' "Max cpu time" (RLIMIT_CPU)


# A CPU-time limit is said where the process has used this share of it: one it will reach (a worker the kernel ends
# every few seconds), not a generous one it never nears (a day's CPU).
LIMIT_USED_SHARE = 0.25
CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100  # /proc's stat counts CPU time in these


def parse_cpu_time_limit(text: str, used_s: float | None) -> tuple[tuple[str, str], ...]:
    """A CPU-time limit (RLIMIT_CPU: ulimit -t, setrlimit, a sandbox's or launcher's limit) from a /proc/PID/limits
    file, where the process has used LIMIT_USED_SHARE of its soft limit or more (``used_s``: its user and system
    CPU seconds): at the soft limit the kernel sends SIGXCPU (which ends the process unless handled), then SIGXCPU
    each second, and SIGKILL at the hard limit. Pure."""
    for line in text.splitlines()[:32]:
        if not line.startswith("Max cpu time"):
            continue
        parts = line[len("Max cpu time"):].split()
        if len(parts) >= 2 and parts[0].isdigit() and used_s is not None and used_s >= LIMIT_USED_SHARE * int(parts[0]):
            hard = f"{int(parts[1]):,} s" if parts[1].isdigit() else parts[1]
            return ((CPU_TIME_LIMIT, f"of {int(parts[0]):,} s (hard {hard}), {used_s:.1f} s of it used"),)
    return ()


# Limits whose difference between two processes says nothing of their speed: a core dump's size, the CPU time's
# (said as a control where it binds: parse_cpu_time_limit).
_LIMITS_NOT_COMPARED = frozenset({"core file size", "cpu time"})


def parse_limits(text: str) -> dict[str, str]:
    """The soft limits of a /proc/PID/limits file by name ("open files" -> "1024", "stack size" -> "unlimited").
    Pure; lines that do not parse are left out."""
    out: dict[str, str] = {}
    for line in text.splitlines()[1:32]:
        if not line.startswith("Max "):
            continue
        name, soft = line[4:26].strip(), line[26:].split()[:1]
        if name and soft and (soft[0].isdigit() or soft[0] == "unlimited"):
            out[name] = soft[0]
    return out


def limits_differences(own: dict[str, str], theirs: dict[str, str]) -> tuple[tuple[str, str, str], ...]:
    """(limit, theirs, own) for each soft limit the two set differently, numbers with thousands separated."""
    def shown(value: str) -> str:
        return f"{int(value):,}" if value.isdigit() else value

    return tuple((name, shown(theirs[name]), shown(own[name])) for name in theirs
                 if name in own and own[name] != theirs[name] and name not in _LIMITS_NOT_COMPARED)


def cpu_time_limit(pid: int, proc_root: Path = PROC) -> tuple[tuple[str, str], ...]:
    """``parse_cpu_time_limit`` of a live process: its limits file and the CPU time its stat says it used."""
    base = proc_root / str(pid)
    try:
        stat = contract_proc.parse_stat(_read(base / "stat", 4096) or "")
    except ValueError:
        return ()
    return parse_cpu_time_limit(_read(base / "limits", 8192) or "",
                                (stat.utime_ticks + stat.stime_ticks) / CLK_TCK)


PTRACE_TRACER = "a ptrace tracer"  # the control's name: another process attached to this one (status' TracerPid)
CPU_QUOTA = "a CPU quota"  # the control's name: a cgroup's quota that binds a peer (sources.peers), not the process
MEMORY_LIMIT = "a memory limit"  # the control's name: a cgroup's memory limit a peer is held at (sources.peers)
IO_LIMIT = "an I/O limit"  # the control's name: a cgroup's block-I/O limit a peer runs at (sources.peers)


def without_own_tracers(controls: tuple[tuple[str, str], ...], proc_root: Path = PROC, *, own_pid: int | None = None
                        ) -> tuple[tuple[str, str], ...]:
    """``controls`` without a ptrace tracer that is this tool's own (a py-spy or gdb it started: the reading saw its
    own look), and with the tracer's name where it is another's: ``process 812 (`strace`)``."""
    me = os.getpid() if own_pid is None else own_pid
    out = []
    for name, value in controls:
        if name == PTRACE_TRACER:
            pid = int(value.split()[-1])
            if _descends_from(pid, me, proc_root):
                continue
            comm = _comm(pid, proc_root)
            value = f"process {pid}" + (f" (`{comm}`)" if comm else "")
        out.append((name, value))
    return tuple(out)


def _comm(pid: int, proc_root: Path = PROC) -> str:
    """The process's name (``/proc/PID/comm``), printable; "" where it cannot be read."""
    return printable((_read(proc_root / str(pid) / "comm", 64) or "").strip())


def _descends_from(pid: int, ancestor: int, proc_root: Path, depth: int = 6) -> bool:
    """Whether ``pid`` is ``ancestor`` or one of its descendants within ``depth`` generations (its /proc stat)."""
    for _ in range(depth):
        if pid == ancestor:
            return True
        text = _read(proc_root / str(pid) / "stat", 4096)
        try:
            pid = contract_proc.parse_stat(text).ppid if text else 0
        except ValueError:
            return False
        if pid <= 1:
            return False
    return False


def parse_thp_mode(text: str) -> str:
    """The bracketed word of ``always [madvise] never``; "" when there is none. Pure."""
    match = re.search(r"\[(\w+)\]", text)
    return match.group(1) if match else ""


def parse_io(text: str) -> ProcessIo | None:
    """``rchar``, ``read_bytes`` and ``syscr`` of /proc/PID/io (with ``wchar`` and ``syscw`` where present); None
    when any of the first three is missing. Pure."""
    fields: dict[str, int] = {}
    for line in text.splitlines()[:16]:
        name, _, value = line.partition(":")
        if value.strip().isdigit():
            fields[name.strip()] = int(value.strip())
    if not {"rchar", "read_bytes", "syscr"} <= fields.keys():
        return None
    return ProcessIo(rchar=fields["rchar"], read_bytes=fields["read_bytes"], syscr=fields["syscr"],
                     wchar=fields.get("wchar"), syscw=fields.get("syscw"))


def parse_timerslack(text: str) -> int | None:
    """Nanoseconds from ``timerslack_ns`` (one decimal number, at most a minute's worth); None otherwise. Pure."""
    word = text.strip()
    if not word.isdigit() or len(word) > 12:
        return None
    return int(word)


def parse_clocksource(text: str) -> str:
    """The clock source's name ("tsc"), one word of letters, digits and '_-'; "" for anything else. Pure."""
    word = text.strip()
    return word if re.fullmatch(r"[A-Za-z0-9_-]{1,32}", word) else ""


def _each_childs_env(kids: tuple[int, ...], proc_root: Path) -> tuple[EnvSetting, ...]:
    """The known variables each child was started with (a child's own later changes are not read: it is not the
    process watched, and its start is what a launcher set)."""
    out: list[EnvSetting] = []
    for child in kids:
        env = started_environ(child, proc_root)
        out.extend(EnvSetting(name=n, value=v, where=f"child {child}") for n, v in known_env(env or {}))
    return tuple(out)


def started_environ(pid: int, proc_root: Path = PROC, *, max_bytes: int = procfs.MAX_ENVIRON_BYTES
                    ) -> dict[str, str] | None:
    """The environment the process was started with (``/proc/PID/environ``, at most ``max_bytes``); None where it
    cannot be read."""
    try:
        with open(proc_root / str(pid) / "environ", "rb") as fh:
            raw = fh.read(max_bytes)
    except OSError:
        return None
    env: dict[str, str] = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[key.decode("utf-8", errors="replace")] = value.decode("utf-8", errors="replace")
    return env


def _env_of(pid: int, proc_root: Path) -> tuple[Maybe[tuple[EnvSetting, ...]], tuple[str, ...]]:
    """The known variables the process was started with (``/proc/PID/environ``), and those it set or changed since
    (``os.environ[...] = ...`` before importing torch: only its memory has them, ``sources.live_environ``), the
    latter marked ``where="program"``. A variable the program removed stays listed: the libraries read it at load.
    Beside them, the names of the variables outside the catalogue it set or changed (``program_env_names``)."""
    env = started_environ(pid, proc_root)
    if env is None:
        return NA(f"/proc/{pid}/environ is not readable (another user's process, or gone)"), ()
    started = dict(known_env(env))
    live = read_live_environ(pid, _any_name, proc_root=proc_root)
    now = dict(known_env(live)) if live is not None else {}
    out = [EnvSetting(name=n, value=now.get(n, v), where="process" if now.get(n, v) == v else "program")
           for n, v in started.items()]
    out += [EnvSetting(name=n, value=v, where="program") for n, v in now.items() if n not in started]
    seen = {e.name for e in out}
    out += [EnvSetting(name=var, value=shown, where=f"command line ({written})")
            for var, value, written in interpreter_options(argv_of(pid, proc_root))
            if var not in seen and (shown := shown_env_value(var, value)) is not None]
    return tuple(out), program_env_names(env, live or {})


def argv_of(pid: int, proc_root: Path = PROC) -> tuple[str, ...]:
    """The process's argv (/proc/PID/cmdline, bounded), or () where it cannot be read."""
    text = _read(proc_root / str(pid) / "cmdline", 1 << 16)
    return tuple(a for a in (text or "").split("\0") if a)


def _any_name(name: str) -> bool:
    return True


def program_env_names(started: dict[str, str], live: dict[str, str]) -> tuple[str, ...]:
    """The names outside the settings catalogue that ``live`` (the environment in the process's memory) sets or
    changes against ``started`` (its /proc environ), printable, sorted, at most MAX_PROGRAM_ENV_NAMES. Pure."""
    names = sorted(n for n, v in live.items()
                   if n not in ENV_BY_NAME and started.get(n) != v and _ENV_NAME.match(n))
    return tuple(names[:MAX_PROGRAM_ENV_NAMES])


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


def _children_only_env(kids_env: tuple[EnvSetting, ...], seen: set[str]) -> tuple[EnvSetting, ...]:
    """Known variables set in children's environments but not in the process's own: the program set them
    (``os.environ[...] = ...``) before it started them, and they run with it."""
    counts: dict[tuple[str, str], int] = {}
    for e in kids_env:
        if e.name not in seen:
            counts[(e.name, e.value)] = counts.get((e.name, e.value), 0) + 1
    return tuple(EnvSetting(name=n, value=v, where=f"children ({c})") for (n, v), c in counts.items())


# --- redaction: names the program chose (thread and child names, values in its environment) ----------------------


def redacted_sample(sample: SchedSample, text: Callable[[str], str]) -> SchedSample:
    """``sample`` with every name the program chose passed through the process's redactor."""
    tasks = tuple(t if text(t.comm) == t.comm else replace(t, comm=text(t.comm)) for t in sample.tasks)
    children = tuple(c if text(c.comm) == c.comm else replace(c, comm=text(c.comm)) for c in sample.children)
    return replace(sample, tasks=tasks, children=children)


def redacted_facts(facts: OsFacts, text: Callable[[str], str]) -> OsFacts:
    env = facts.env
    if isinstance(env, tuple):
        env = tuple(replace(e, value=text(e.value)) for e in env)
    return replace(facts, env=env, children_env=tuple(replace(e, value=text(e.value)) for e in facts.children_env))
