"""The scheduler's view of one window, summarised: how many threads of the process (and of its children) wanted a
CPU at once against the cores it may use, which native pools they are, how long each thread waited for a CPU, how
often threads switched, what the cgroup held back, the pressure, the children started. Pure.

*Demand* is the number of threads runnable at once, on average: over a window, the sum of every thread's on-CPU
time and run delay (schedstat) divided by the window. A process whose demand exceeds its cores makes its threads
wait for a CPU in turn; the run delay of the threads that do the work is what that costs them. The run delay also
comes from other processes on a shared machine: ``external_runnable`` (the machine's runnable tasks, /proc/stat,
less the process's own) says how much, so a finding can tell its own share.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace

from dflash_diag.model import NA, Maybe, Observation, ProcThreadSample
from dflash_diag.model.sched import (
    CgroupCpu,
    ChildSched,
    CpuSetLoad,
    IoRates,
    PoolGroup,
    SchedSample,
    SchedSummary,
    SettingReading,
    ThreadSched,
    cpu_list_count,
    io_rates_between,
    memory_limit_binding,
    size_text,
)
from dflash_diag.model.text import printable

MIN_SPAN_S = 0.5  # two readings closer than this say nothing about rates
ACTIVE_SHARE = 0.01  # a native thread that ran 1% of a core in the window is part of a working pool


def window_readings(obs: Observation) -> list[tuple[ProcThreadSample, ProcThreadSample, float]]:
    """(first, last, seconds between them) of every thread read in both the window's first and last /proc sweep:
    what a per-thread rate over the window is made of."""
    sweeps = [s for s in obs.proc if s]
    if len(sweeps) < 2:
        return []
    first = {t.tid: t for t in sweeps[0]}
    return [(first[t.tid], t, t.monotonic_s - first[t.tid].monotonic_s) for t in sweeps[-1] if t.tid in first]


@dataclass(frozen=True, slots=True)
class ThreadRates:
    """One thread's rates over the window, from its first and last /proc reading."""

    tid: int
    comm: str
    kernel_cpus: float  # CPUs' worth in the kernel (stime)
    cpu: float  # CPUs' worth in all (stime + utime)
    minor_per_s: float  # page faults a second (0 where the readings had none)
    major_per_s: float


def thread_rates(obs: Observation) -> list[ThreadRates]:
    """Every thread read at both ends of the window, at least ``MIN_SPAN_S`` apart: its CPU, the kernel's part and
    its page faults, per second."""
    out = []
    for start, t, span_s in window_readings(obs):
        if span_s < MIN_SPAN_S:
            continue
        kernel = max(0.0, t.stime_s - start.stime_s) / span_s
        faults = None not in (t.minflt, start.minflt, t.majflt, start.majflt)
        out.append(ThreadRates(
            tid=t.tid, comm=t.comm, kernel_cpus=kernel, cpu=kernel + max(0.0, t.utime_s - start.utime_s) / span_s,
            minor_per_s=(t.minflt - start.minflt) / span_s if faults else 0.0,  # type: ignore[operator]
            major_per_s=(t.majflt - start.majflt) / span_s if faults else 0.0))  # type: ignore[operator]
    return out


def io_rates(obs: Observation) -> IoRates | None:
    """The process's I/O counters a second over the window's /proc/PID/io readings; None where fewer than two were
    read (a process not ours to read) or they span under half a second."""
    readings = [s for s in obs.sched if s.io is not None]
    if len(readings) < 2:
        return None
    first, last = readings[0].io, readings[-1].io
    span_s = readings[-1].monotonic_s - readings[0].monotonic_s
    assert first is not None and last is not None
    if span_s < MIN_SPAN_S:
        return None
    return io_rates_between(first, last, span_s)


def memory_limit_binds(obs: Observation) -> str | None:
    """The process's own memory cgroup's limit where it binds over the window (``memory_limit_binding`` from its
    first reading to its last): "a memory limit of 2 GiB (cgroup `job-17`): its usage at the limit, which its charges
    met ... times a second ..."; None where no finite limit was read, the readings span under half a second, or the
    process stays under it."""
    readings = [s for s in obs.sched if s.cgroup_memory is not None]
    if len(readings) < 2 or readings[-1].monotonic_s - readings[0].monotonic_s < MIN_SPAN_S:
        return None
    first, last = readings[0].cgroup_memory, readings[-1].cgroup_memory
    assert first is not None and last is not None
    binding = memory_limit_binding(first, last, readings[-1].monotonic_s - readings[0].monotonic_s)
    if binding is None:
        return None
    return f"a memory limit of {size_text(last.limit_bytes)} (cgroup `{printable(last.group)[:80]}`): {binding}"


def write_rate(obs: Observation) -> tuple[float, float] | None:
    """(write calls a second, bytes a second) of the process over the window; None where not read or not moving
    forward."""
    rates = io_rates(obs)
    if rates is None or rates.write_calls is None or rates.written_bytes is None or rates.write_calls < 0 \
            or rates.written_bytes < 0:
        return None
    return rates.write_calls, rates.written_bytes


@dataclass(frozen=True, slots=True)
class ReopenedFile:
    """A file the process opened and closed again and again over the window: seen open in ``open_in`` of the
    ``readings`` /proc made of its descriptors, and open again after a reading without it ``reopened`` times."""

    path: str
    open_in: int
    readings: int
    reopened: int

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


# A file counts as opened again and again where it came back after a reading without it this many times: a file
# written once (a checkpoint, an export) is there for a stretch of readings, then gone, and comes back at most once.
REOPENED_MIN = 2


def reopened_files(obs: Observation) -> tuple[ReopenedFile, ...]:
    """The files that come and go between the window's readings of the process's descriptors (each reading lists
    the regular files open at that instant, ``ProcessSample.files_open``): most comebacks first. A file the program
    opens per step, per record or per transaction is open at some readings and closed at others; one it keeps open
    is at every reading. Pure."""
    listed = [set(r.files_open) for r in obs.resources if r.files_open is not None]
    if len(listed) < 3:
        return ()
    counts: Counter[str] = Counter()
    back: Counter[str] = Counter()
    for before, now in zip(listed, listed[1:], strict=False):
        for path in now - before:
            back[path] += 1
    for files in listed:
        counts.update(files)
    out = [ReopenedFile(path, counts[path], len(listed), n) for path, n in back.items() if n >= REOPENED_MIN]
    return tuple(sorted(out, key=lambda f: (-f.reopened, f.path)))


def reopened_text(files: tuple[ReopenedFile, ...]) -> str:
    """"the process opens and closes ledger.sqlite-journal over and over (open at 5 of 11 readings, opened again 4
    times)", for the first two; "" for none."""
    if not files:
        return ""
    said = [f"{f.name} (open at {f.open_in} of {f.readings} readings, opened again {f.reopened} times)"
            for f in files[:2]]
    if len(said) == 1:
        name, counts = said[0].split(" (", 1)
        return f"the process opens and closes {name} over and over ({counts}"
    return f"the process opens and closes files over and over: {', '.join(said)}"


ASLEEP = frozenset({"S", "D"})  # a thread's states in which it is blocked in the kernel


def blocked_in(obs: Observation, tids: Iterable[int], *, wchan: bool = False,
               states: frozenset[str] | None = ASLEEP) -> tuple[int, Counter[str]]:
    """(how many readings of these threads the window's /proc sweeps made, and what each one in ``states`` (None:
    any with a call read) was blocked in: the system call, else with ``wchan`` the kernel's wait channel)."""
    wanted = set(tids)
    readings = 0
    calls: Counter[str] = Counter()
    for sweep in obs.proc:
        for t in sweep:
            if t.tid in wanted:
                readings += 1
                call = t.syscall or (t.wchan if wchan else None)
                if call and (states is None or t.state in states):
                    calls[call] += 1
    return readings, calls


def storage_settings_text(obs: Observation, tids: Iterable[int]) -> str:
    """"; /proc caught it in rename on `new/0412.rec`, and its directory has the dirsync attribute (chattr +D): ..."
    where a sweep caught one of these threads blocked in a file system call on a file whose directory or mount the
    kernel makes such calls wait on (``ProcThreadSample.target_settings``; the newest such reading); "" where none."""
    wanted = set(tids)
    seen = [t for sweep in obs.proc for t in sweep if t.tid in wanted and t.target_settings and t.syscall_target]
    if not seen:
        return ""
    last = seen[-1]
    assert last.syscall_target is not None
    name = "/".join(last.syscall_target.rsplit("/", 2)[-2:])
    return f"; /proc caught it in {last.syscall} on `{name}`, and {'; '.join(last.target_settings)}"


def summarise(obs: Observation) -> Maybe[SchedSummary]:
    """The window's scheduler view; NA (with why) when /proc gave fewer than two sweeps far enough apart."""
    sweeps = [s for s in obs.proc if s]
    if len(sweeps) < 2 or sweeps[-1][0].monotonic_s - sweeps[0][0].monotonic_s < MIN_SPAN_S:
        return NA("fewer than two /proc sweeps in the window")
    first, last = sweeps[0], sweeps[-1]
    span_s = last[0].monotonic_s - first[0].monotonic_s
    python_tids = {t.os_thread_id: (t.name or f"tid {t.os_thread_id}") for s in obs.stacks for t in s.threads
                   if t.os_thread_id is not None}
    sched = [s for s in obs.sched if s.tasks]
    switches = _switch_rates(sched)
    threads = tuple(_thread(t, first, python_tids, switches, span_s) for t in last)
    cpus = _cpus_allowed(sched)
    threads = tuple(_with_cpus(t, cpus.get(t.tid, "")) for t in threads)
    facts = obs.os_facts
    machine = facts.machine_cpus if facts is not None else 0
    allowed = facts.process_cpu_count if facts is not None and facts.process_cpu_count else machine
    quota = _quota(sched)
    cores = float(min([c for c in (allowed or None, quota) if c], default=machine or 1))
    children_demand, children_used, children_threads, started = _children(sched)
    python = [t for t in threads if t.python]
    native = [t for t in threads if not t.python]
    demand = sum(t.demand for t in threads) + children_demand
    return SchedSummary(
        window_s=span_s,
        machine_cpus=machine,
        allowed_cpus=allowed,
        quota_cores=quota,
        cores=cores,
        os_threads=len(threads),
        python_threads=len(python),
        native_threads=len(native),
        native_active=sum(1 for t in native if t.cpu_share >= ACTIVE_SHARE),
        demand=demand,
        python_demand=sum(t.demand for t in python),
        native_demand=sum(t.demand for t in native),
        children_demand=children_demand,
        children_threads=children_threads,
        used_cores=sum(t.cpu_share for t in threads) + children_used,
        voluntary_per_s=_total(switches, 0),
        involuntary_per_s=_total(switches, 1),
        external_runnable=_external(sched, demand),
        throttled_share=_throttled_share(sched),
        throttled_s=_throttled_s(sched),
        pressure=_pressure(sched),
        children_started=started,
        pools=_pools(native),
        cpu_sets=_cpu_sets(threads, machine),
        threads=threads,
        libraries=facts.libraries if facts is not None else (),
        children_used=children_used,
        children=len(sched[-1].children) if sched else 0,
    )


def _thread(t: ProcThreadSample, first: Iterable[ProcThreadSample], python_tids: dict[int, str],
            switches: dict[int, tuple[float, float]], span_s: float) -> ThreadSched:
    before = next((p for p in first if p.tid == t.tid), None)
    run0, wait0 = (before.run_ns, before.runq_wait_ns) if before is not None else (0, 0)
    # A thread that started during the window counts from its start (its counters began at zero then).
    run = max(0, t.run_ns - run0) / 1e9 / span_s
    wait = max(0, t.runq_wait_ns - wait0) / 1e9 / span_s
    rates = switches.get(t.tid)
    return ThreadSched(tid=t.tid, name=python_tids.get(t.tid, t.comm), python=t.tid in python_tids,
                       cpu_share=min(1.0, run), runq_share=min(1.0, wait),
                       voluntary_per_s=rates[0] if rates else None, involuntary_per_s=rates[1] if rates else None,
                       cpus_allowed="", nice=t.nice, policy=t.policy)


def _with_cpus(t: ThreadSched, cpus: str) -> ThreadSched:
    return replace(t, cpus_allowed=cpus) if cpus else t


def _switch_rates(sched: list[SchedSample]) -> dict[int, tuple[float, float]]:
    """tid -> (voluntary, involuntary) switches per second between its first and last reading."""
    if len(sched) < 2:
        return {}
    seen: dict[int, tuple[float, int, int]] = {}
    out: dict[int, tuple[float, float]] = {}
    for sample in sched:
        for task in sample.tasks:
            start = seen.setdefault(task.tid, (sample.monotonic_s, task.voluntary_switches, task.involuntary_switches))
            dt = sample.monotonic_s - start[0]
            if dt >= MIN_SPAN_S:
                out[task.tid] = (max(0, task.voluntary_switches - start[1]) / dt,
                                 max(0, task.involuntary_switches - start[2]) / dt)
    return out


def _total(rates: dict[int, tuple[float, float]], i: int) -> float | None:
    return sum(r[i] for r in rates.values()) if rates else None


def _cpus_allowed(sched: list[SchedSample]) -> dict[int, str]:
    return {t.tid: t.cpus_allowed for s in sched for t in s.tasks}


def _quota(sched: list[SchedSample]) -> float | None:
    for sample in reversed(sched):
        cgroup = sample.cgroup
        if not isinstance(cgroup, NA):
            return cgroup.quota_cores if isinstance(cgroup.quota_cores, float) else None
    return None


def _children(sched: list[SchedSample]) -> tuple[float, float, int, int]:
    """(children's demand, their CPU use, their threads at the end, children started in the window)."""
    per = child_loads(sched)
    if not per:
        return 0.0, 0.0, 0, 0
    demand = sum(load.demand for load in per)
    used = sum(load.used for load in per)
    return demand, used, sum(c.threads for c in sched[-1].children), sum(1 for load in per if load.started)


@dataclass(frozen=True, slots=True)
class ChildLoad:
    """One direct child over the window: its CPU use and demand (use plus run delay) in CPUs."""

    pid: int
    comm: str
    used: float
    demand: float
    started: bool  # appeared during the window
    last: ChildSched | None = None  # its last reading: how the scheduler weighs it (nice, policy, autogroup)
    kernel_share: float | None = None  # of its CPU time over the window, the part in the kernel (None: not read)
    # The watched process's /proc entries it held open, with the number of sweeps that saw each, most first.
    watching: tuple[tuple[str, int], ...] = ()
    sweeps: int = 0  # the sweeps that read it

    @property
    def got_share(self) -> float:
        """Of the time it wanted a CPU, the part it was on one."""
        return self.used / self.demand if self.demand > 0 else 0.0


def child_loads(sched: list[SchedSample]) -> list[ChildLoad]:
    """Each direct child seen in the window (a PID reused by a new child is another child), with its load."""
    if len(sched) < 2:
        return []
    span_s = sched[-1].monotonic_s - sched[0].monotonic_s
    if span_s < MIN_SPAN_S:
        return []
    initial = {(c.pid, c.start_ticks) for c in sched[0].children}
    first: dict[tuple[int, int], ChildSched] = {}
    last: dict[tuple[int, int], ChildSched] = {}
    watching: dict[tuple[int, int], Counter[str]] = defaultdict(Counter)
    sweeps: Counter[tuple[int, int]] = Counter()
    for sample in sched:
        for child in sample.children:
            key = (child.pid, child.start_ticks)
            first.setdefault(key, child)
            last[key] = child
            watching[key].update(child.watching)
            sweeps[key] += 1
    out = []
    for key, end in last.items():
        start = first[key]
        base_run, base_wait = (start.run_ns, start.runq_wait_ns) if key in initial else (0, 0)
        run_s, wait_s = max(0, end.run_ns - base_run) / 1e9, max(0, end.runq_wait_ns - base_wait) / 1e9
        out.append(ChildLoad(end.pid, end.comm, run_s / span_s, (run_s + wait_s) / span_s, key not in initial,
                             end, _kernel_share(start if key in initial else None, end),
                             tuple(watching[key].most_common()), sweeps[key]))
    return out


def _kernel_share(start: ChildSched | None, end: ChildSched) -> float | None:
    """Of a child's CPU time between two readings (from its start where ``start`` is None), the kernel's part."""
    if end.user_ticks is None or end.kernel_ticks is None:
        return None
    user, kernel = end.user_ticks, end.kernel_ticks
    if start is not None:
        if start.user_ticks is None or start.kernel_ticks is None:
            return None
        user, kernel = user - start.user_ticks, kernel - start.kernel_ticks
    total = user + kernel
    return kernel / total if total > 0 else None


def _external(sched: list[SchedSample], own_demand: float) -> float | None:
    """Other tasks runnable on the machine at once, on average: /proc/stat's count at the sweeps, less the process's
    own demand and less one, the sweep that reads it (the tool's thread is running as it reads)."""
    values = [s.procs_running for s in sched if s.procs_running is not None]
    if not values:
        return None
    return max(0.0, sum(values) / len(values) - 1.0 - own_demand)


def _throttled_share(sched: list[SchedSample]) -> float | None:
    pair = _cgroup_pair(sched)
    if pair is None:
        return None
    a, b = pair
    if a.periods is None or b.periods is None or a.throttled_periods is None or b.throttled_periods is None:
        return None
    periods = b.periods - a.periods
    return max(0, b.throttled_periods - a.throttled_periods) / periods if periods > 0 else None


def _throttled_s(sched: list[SchedSample]) -> float | None:
    pair = _cgroup_pair(sched)
    if pair is None or pair[0].throttled_us is None or pair[1].throttled_us is None:
        return None
    return max(0, pair[1].throttled_us - pair[0].throttled_us) / 1e6


def _cgroup_pair(sched: list[SchedSample]) -> tuple[CgroupCpu, CgroupCpu] | None:
    groups = [s.cgroup for s in sched if isinstance(s.cgroup, CgroupCpu)]
    return (groups[0], groups[-1]) if len(groups) >= 2 else None


def _pressure(sched: list[SchedSample]) -> tuple[tuple[str, str, float], ...]:
    if len(sched) < 2:
        return ()
    a, b = sched[0], sched[-1]
    span_s = b.monotonic_s - a.monotonic_s
    if span_s < MIN_SPAN_S:
        return ()
    before = {(p.resource, p.scope): p for p in a.pressure}
    out = []
    for p in b.pressure:
        old = before.get((p.resource, p.scope))
        if old is not None:
            out.append((p.resource, p.scope, min(1.0, max(0, p.some_us - old.some_us) / 1e6 / span_s)))
    return tuple(out)


def _pools(native: list[ThreadSched]) -> tuple[PoolGroup, ...]:
    groups: dict[str, list[ThreadSched]] = defaultdict(list)
    for t in native:
        groups[t.name].append(t)
    pools = [PoolGroup(comm=comm, threads=len(ts), active=sum(1 for t in ts if t.cpu_share >= ACTIVE_SHARE),
                       demand=sum(t.demand for t in ts)) for comm, ts in groups.items()]
    return tuple(sorted(pools, key=lambda p: (-p.demand, -p.threads, p.comm)))


def _cpu_sets(threads: tuple[ThreadSched, ...], machine: int) -> tuple[CpuSetLoad, ...]:
    groups: dict[str, list[ThreadSched]] = defaultdict(list)
    for t in threads:
        if t.cpus_allowed:
            groups[t.cpus_allowed].append(t)
    out = []
    for cpus, ts in groups.items():
        count = cpu_list_count(cpus)
        if 0 < count < machine:
            out.append(CpuSetLoad(cpus=cpus, cpu_count=count, threads=len(ts), demand=sum(t.demand for t in ts)))
    return tuple(sorted(out, key=lambda c: -c.demand))


_CACHE: list[tuple[Observation, Maybe[SchedSummary]]] = []  # the last two observations summarised (rules share it)


def summary_of(obs: Observation) -> Maybe[SchedSummary]:
    """``summarise(obs)``, computed once per observation for every rule that reads it."""
    for seen, summary in _CACHE:
        if seen is obs:
            return summary
    summary = summarise(obs)
    _CACHE.append((obs, summary))
    del _CACHE[:-2]
    return summary


# --- a thread-count setting that keeps torch's ops narrower than the idle CPUs allow -------------------------------

# CPUs the process may use that sat idle on average over the window (no thread of the process, and no other task on
# the machine, wanted them): what a wider pool could have used. Half a CPU: the tool's own sampling takes some of
# an idle CPU while it watches (py-spy's dumps, the sweeps).
IDLE_CORES = 0.5
# The threads whose speed is the program's on a CPU this share of the window: they compute flat out, alone (read by
# `cpu-threads-capped` and by the stage verdict's text beside the time).
CAPPED_CPU_SHARE = 0.7
# The settings that fix how many threads the math libraries' pools run (the environment's, and the calls').
THREAD_CAPS = frozenset({"OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "BLIS_NUM_THREADS",
                         "torch.set_num_threads"})


def others_runnable(obs: Observation, summary: SchedSummary) -> float:
    """What other tasks on the machine wanted at once, in CPUs: /proc/stat's runnable count at the sweeps, less the
    process's own demand and less one, the sweep that reads it (the tool's thread runs as it reads); the median
    sweep, not the mean: the tool's own stack dumps run for a few tens of milliseconds at a time and one of them
    caught in a sweep is not a task that keeps a CPU busy."""
    counts = sorted(s.procs_running for s in obs.sched if s.procs_running is not None)
    if not counts:
        return 0.0
    mid = len(counts) // 2
    median = counts[mid] if len(counts) % 2 else (counts[mid - 1] + counts[mid]) / 2
    return max(0.0, median - 1.0 - summary.demand)


def idle_cores(obs: Observation, summary: SchedSummary) -> float:
    """The CPUs the process may use that neither it nor other tasks wanted, on average over the window."""
    return summary.cores - summary.used_cores - others_runnable(obs, summary)


def cap_width(r: SettingReading) -> int | None:
    """The threads a pool-size setting allows ("1"; "2,1" for nested OpenMP levels: the first), or None."""
    head = r.value.strip().split(",")[0].strip()
    return int(head) if head.isdigit() and int(head) > 0 else None


def thread_caps(readings: Iterable[SettingReading], cores: float) -> list[tuple[SettingReading, int]]:
    """The process's own pool-size settings below its CPUs, narrowest first (a child's environment sizes the
    child's pools, not this process's)."""
    caps = [(r, w) for r in readings if r.name in THREAD_CAPS and not r.source.startswith("environment of")
            and (w := cap_width(r)) is not None and w < cores]
    return sorted(caps, key=lambda c: c[1])


# Linux keeps a connection its side closed in TIME_WAIT this long (TCP_TIMEWAIT_LEN): the count is a minute's closes.
TIME_WAIT_S = 60.0


def connection_churn_text(obs: Observation) -> str:
    """"; 2,460 TCP connections to 127.0.0.1:8123, which the process is connected to, were closed in the last
    minute (TIME_WAIT ...), about 41 a second: a new connection per request ..." for the endpoint with the most
    closes (``OsFacts.closed_connections``); "" when none."""
    facts = obs.os_facts
    churn = facts.closed_connections if facts is not None else ()
    if not churn:
        return ""
    endpoint, closed = churn[0]
    return (f"; {closed:,} TCP connections to {endpoint}, which the process uses, were closed in the "
            f"last minute (TIME_WAIT in its network namespace), about {closed / TIME_WAIT_S:.0f} a second: a new "
            "connection per request (no keep-alive, or a server that closes each), each a handshake before the "
            "request")
