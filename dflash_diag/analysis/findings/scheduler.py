"""The operating system's view: threads that wait for a CPU because the process runs more of them than it may
use, CPUs pinned too narrow, a cgroup quota that stops the process, memory and I/O pressure, children started
over and over. From /proc and the cgroup files (``analysis.sched``), so it works from outside on any program.

Each is a cause only with its cost measured in this process: the share of the window the threads that do the work
spent runnable but waiting for a CPU (schedstat's run delay) and the part of it the process's own threads made
(the rest is other processes on a shared machine), the CPU time the quota held back, the share of the window its
tasks stalled on memory or I/O, the time its training threads waited on children being started.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import replace

from dflash_contract.settings import AREA_KERNEL, AREA_MEMORY, AREA_THREADS, DEBUG_ALLOCATORS, ENV_BY_NAME
from dflash_diag.analysis.findings._context import (
    Context,
    bytes_rate,
    libc_text,
    line_site,
    most_common_own_line,
    own_frame,
    pct,
    permission_watches_text,
    speed_matters,
    stage_label,
)
from dflash_diag.analysis.findings._registry import RuleSpec
from dflash_diag.analysis.findings.settings import ops_share_of
from dflash_diag.analysis.native import MIN_SAMPLES, share_in, thread_stacks
from dflash_diag.analysis.peers import MATCH_S
from dflash_diag.analysis.sampled import classified
from dflash_diag.analysis.sched import (
    CAPPED_CPU_SHARE,
    IDLE_CORES,
    blocked_in,
    child_loads,
    idle_cores,
    io_rates,
    memory_limit_binds,
    others_runnable,
    reopened_files,
    reopened_text,
    storage_settings_text,
    summary_of,
    thread_caps,
    thread_rates,
)
from dflash_diag.analysis.settings import by_area, non_default
from dflash_diag.analysis.threads import nearest_index, oversubscription
from dflash_diag.model import Finding, Severity, ThreadSample, ThreadState, ThreadStats
from dflash_diag.model.common import is_na
from dflash_diag.model.findings import NOTE
from dflash_diag.model.sched import EnvSetting, SchedSummary, SettingReading, ThreadSched
from dflash_diag.model.waits import WAIT_CHILD, WAIT_SLEEP, WaitEdge

# The process's own threads (and its children's) must want more than this many times its cores, plus one, before
# it is oversubscribed by its own doing: four busy Python threads on two cores take turns (the GIL, the work),
# but a pool per thread that keeps 15 threads runnable on 2 cores spends its time switching and spinning.
OVERSUBSCRIBED_FACTOR = 2.0
# ... and the native pools (threads Python did not start, and child processes) must by themselves want the cores:
# the excess comes from pool sizes, the thing a setting changes.
POOL_DEMAND_CORES = 1.0
POOL_THREADS_PER_CORE = 2
# The threads that do the work must have waited for a CPU this share of the window (schedstat run delay).
RUN_DELAY_SHARE = 0.20
# The cost (run delay the process's own excess explains) that makes it a warning. The gates above carry the
# verdict (the process alone oversubscribes its CPUs with pools); on a machine other processes load as well, the
# process's own part of the wait is smaller (a 2-core box with 44 other runnable tasks: 21% of a 57% wait).
WARNING_COST = 0.05
# A thread computing in this share of its samples does the work whose CPU waits are the cost.
WORKING_SHARE = 0.5
_WORK = (ThreadState.PYTHON, ThreadState.NATIVE, ThreadState.COMPILE, ThreadState.CHECKPOINT, ThreadState.GPU_WAIT)
# A narrower CPU set is crowded when its threads want half a CPU more than it has.
CPUSET_EXCESS = 0.5
# Throttling: the quota ran out in this share of the enforcement periods, and held back this share of the CPU
# time the process wanted.
THROTTLED_PERIODS_SHARE = 0.2
THROTTLED_COST = 0.05
# Pressure stall: some task of the group stalled on memory / I/O this share of the window.
PRESSURE_SHARE = 0.10
# The process's own threads blocked in the kernel (state D) in this share of their readings: the stall is its own.
D_STATE_SHARE = 0.10
# Children started: at least this many, this often, with the training threads waiting on children this share.
CHURN_MIN = 2
CHURN_PER_S = 0.5
CHURN_WAIT_SHARE = 0.2
MAX_NAMED = 4
# A thread the scheduler weighs below default ones (nice above 0, SCHED_BATCH, SCHED_IDLE) is the cause when it
# waited for a CPU this share of the window, and at least as large a part of the time it wanted one as the
# process's default-priority threads did (on a machine other processes load, every thread waits: the lowered
# priority is what makes this one wait longer). It leads only where its stage limits throughput or it trains.
DEPRIORITIZED_WAIT_SHARE = 0.20

RULES = (
    # Threads descheduled while they hold the GIL make the others wait for it: the GIL waits of an oversubscribed
    # process are its consequence, named after it.
    RuleSpec("cpu-oversubscribed", sampled=True, produces=("gil-contention",)),
    RuleSpec("cpu-affinity-narrow", sampled=True),
    RuleSpec("cpu-pool-spin", sampled=True, produces=("gil-contention",)),
    RuleSpec("cpu-throttled"),
    RuleSpec("memory-pressure"),
    RuleSpec("io-pressure"),
    RuleSpec("process-churn", sampled=True),
    RuleSpec("thread-deprioritized", sampled=True),
    RuleSpec("child-debug-mode", sampled=True),
    RuleSpec("child-priority-lost", sampled=True),
    RuleSpec("child-watches-process", sampled=True),
    RuleSpec("page-faults", sampled=True),
    RuleSpec("kernel-time", sampled=True),
    RuleSpec("timer-slack", sampled=True),
    RuleSpec("storage-reads", sampled=True),
    RuleSpec("kernel-wait", sampled=True),
    RuleSpec("native-sleep", sampled=True),
    RuleSpec("fork-cost", sampled=True),
    RuleSpec("cpu-threads-capped", sampled=True),
    # About the diagnosis' conditions when no cause above is the process's own (other processes crowd the machine):
    # it names no cause and leads no headline, but says why the shares and the stage verdict may move from one
    # window to the next.
    RuleSpec("cpu-contended", kind=NOTE, slows=False, sampled=True),
)
# The causes that already say the threads wait for a CPU, and why: the note would repeat them.
_CPU_CAUSES = frozenset({"cpu-oversubscribed", "cpu-affinity-narrow", "cpu-throttled", "thread-deprioritized",
                         "cpu-pool-spin", "child-priority-lost", "child-watches-process"})


def check(ctx: Context) -> Iterator[Finding]:
    found: list[Finding] = []
    summary = summary_of(ctx.obs)
    if not is_na(summary):
        assert isinstance(summary, SchedSummary)
        working = working_threads(ctx, summary)
        found += _oversubscribed(ctx, summary, working)
        if not found:
            found += _pool_spin(ctx, summary, working)
        # Where the process's own pools oversubscribe the CPUs it may use, the narrow set is said beside them as
        # information: the excess is the pools' (the fix the program owns), the set the launcher's.
        narrow = list(_narrow_affinity(ctx, summary, working))
        if any(f.rule_id == "cpu-oversubscribed" for f in found):
            narrow = [replace(f, severity=Severity.INFO, impact=0.0) for f in narrow]
        found += narrow
        found += _throttled(ctx, summary)
        found += _pressure(ctx, summary)
        found += _churn(ctx, summary)
        found += _deprioritized(ctx, summary)
        found += _child_debug(ctx, summary, working)
        found += _child_priority_lost(ctx, summary, working)
        found += _child_watches(ctx, summary, working)
        found += _page_faults(ctx, summary, working)
        found += _kernel_time(ctx, summary, working)
        found += _timer_slack(ctx, summary)
        found += _storage_reads(ctx)
        found += _kernel_waits(ctx)
        found += _native_sleeps(ctx)
        found += _fork_cost(ctx, summary)
        found += _threads_capped(ctx, summary, working)
    yield from found
    if not any(f.rule_id in _CPU_CAUSES for f in found):
        yield from _contended(ctx)


def _contended(ctx: Context) -> Iterator[Finding]:
    over = oversubscription(ctx.threads)
    if over is None:
        return
    shown = over.threads[:4]
    evidence = [(f"{name} (/proc)", f"computing in {100 * computing:.0f}% of its samples, on a CPU {cpu:.0f}% of "
                                    f"the window, runnable and waiting for a CPU {runq:.0f}%")
                for name, computing, cpu, runq in shown]
    evidence += _cpu_takers(ctx)
    if ctx.obs.process is not None and ctx.obs.process.cpus_allowed is not None:
        evidence.append(("CPUs this process may run on", str(ctx.obs.process.cpus_allowed)))
    yield Finding(
        rule_id="cpu-contended",
        severity=Severity.INFO,
        claim=(f"the threads that compute wait for a CPU: {', '.join(n for n, *_ in shown)} waited for one "
               f"{over.runq_pct:.0f}% of the window on average while computing: their shares"
               + (", and which stage looks slower," if ctx.pipeline.stages_from else "")
               + " follow the scheduler as much as the code, and may change from one window to the next"),
        evidence=tuple(evidence),
        remedy=("Give the process the cores its threads want: fewer other processes on the machine, or fewer threads "
                "in it (torch.set_num_threads per worker thread, OMP_NUM_THREADS, fewer workers); judge a bottleneck "
                "again once the threads get their CPU."),
        kind=NOTE,
    )



# A child is named among the takers of the CPUs from this much use.
TAKER_CORES = 0.1


def _cpu_takers(ctx: Context) -> list[tuple[str, str]]:
    """Evidence: who else had the CPUs the threads waited for: the busiest children (with how the scheduler weighs
    them) and the other tasks runnable on the machine."""
    rows: list[tuple[str, str]] = []
    facts = ctx.obs.os_facts
    own_group = facts.autogroup if facts is not None and facts.autogroup_enabled else ""
    for load in sorted(child_loads(list(ctx.obs.sched)), key=lambda c: -c.used)[:3]:
        if load.used < TAKER_CORES:
            break
        how = f"on a CPU {load.used:.2f} CPUs on average, wanted {load.demand:.2f}"
        if load.last is not None and load.last.nice is not None:
            how += f"; {load.last.priority_text()}"
        if own_group and load.last is not None and load.last.autogroup and load.last.autogroup != own_group:
            how += f"; a session of its own ({load.last.autogroup}: weighed like the process's whole session)"
        rows.append((f"child {load.pid} (`{load.comm}`)", how))
    summary = summary_of(ctx.obs)
    if not is_na(summary):
        assert isinstance(summary, SchedSummary)
        if summary.external_runnable is not None:
            rows.append(("other tasks runnable on the machine", f"{summary.external_runnable:.1f} on average"))
    return rows


# --- who does the work -------------------------------------------------------------------------------------------


def working_threads(ctx: Context, summary: SchedSummary) -> list[tuple[ThreadStats | None, ThreadSched]]:
    """The Python threads that do the work, with their scheduler readings: computing in most of their samples; or,
    when too few samples were taken to say (py-spy starved of CPU on an oversubscribed box takes one dump in
    seconds), runnable at least half of the window by /proc (on a CPU or waiting for one)."""
    stats_by_tid = {t.os_thread_id: t for t in ctx.threads if t.os_thread_id is not None}
    sampled = {t.os_thread_id for t in ctx.sampled()}
    out: list[tuple[ThreadStats | None, ThreadSched]] = []
    for t in summary.threads:
        stats = stats_by_tid.get(t.tid)
        if not t.python or t.name.startswith("dflash-diag-"):
            continue
        if t.tid in sampled and stats is not None:
            if _computing_share(stats) >= WORKING_SHARE:
                out.append((stats, t))
        elif t.demand >= WORKING_SHARE:
            out.append((stats, t))
    return out


# Native pools kept busy by their own idle spinning: the settings that make OpenMP's idle threads spin rather than
# sleep, and the least CPU (in cores) the process's pools and its children's must then burn to be a suspect.
SPIN_POOL_CORES = 0.5
_SPIN_SUFFIXES = {"K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}


def _spins(r: SettingReading) -> bool:
    value = r.value.strip().upper()
    if r.name == "OMP_WAIT_POLICY":
        return value == "ACTIVE"
    if r.name == "KMP_LIBRARY":
        return value == "TURNAROUND"
    if r.name in ("GOMP_SPINCOUNT", "KMP_BLOCKTIME"):
        if value in ("INFINITE", "INFINITY"):
            return True
        limit = 300_000 if r.name == "GOMP_SPINCOUNT" else 200  # their defaults (spins; ms)
        # libgomp reads GOMP_SPINCOUNT with a k, M, G or T suffix (times 10^3 ... 10^12).
        scale = _SPIN_SUFFIXES.get(value[-1:], 1) if r.name == "GOMP_SPINCOUNT" else 1
        digits = value[:-1] if scale > 1 else value
        return digits.isdigit() and int(digits) * scale > limit
    return False


def _pool_spin(ctx: Context, summary: SchedSummary,
               working: list[tuple[ThreadStats | None, ThreadSched]]) -> Iterator[Finding]:
    """OpenMP told to spin when idle (OMP_WAIT_POLICY=ACTIVE, an endless GOMP_SPINCOUNT/KMP_BLOCKTIME): its pool
    threads, and those of every child that inherited the environment, hold CPUs between parallel regions while the
    threads that do the work wait for one. Not a count of threads (that is cpu-oversubscribed): a few pools burning
    cores with nothing to do. The cost is the working threads' run delay times the process's own share of it."""
    spinning = [r for r in by_area(non_default(ctx.obs), AREA_THREADS) if _spins(r)]
    pool_demand = summary.native_demand + summary.children_demand
    if not spinning or not working or pool_demand < SPIN_POOL_CORES:
        return
    delay = mean_delay(working)
    if delay < RUN_DELAY_SHARE:
        return
    cost = delay * _own_share(summary, summary.demand - summary.cores)
    children = (f" and {summary.children_threads} in {_child_count(ctx)} child processes"
                if summary.children_threads else "")
    said = ", ".join(_said(r) for r in spinning[:2])
    claim = (f"OpenMP's idle threads spin instead of sleeping ({said}): the native pool threads "
             f"({summary.native_active} of the process{children}) wanted {pool_demand:.1f} of its "
             f"{_cores_text(summary)} while {thread_names(working)}, which do the work, waited for a CPU {pct(delay)} of "
             "the window")
    evidence = [
        ("threads runnable (demand)", _demand_text(summary)),
        *wait_rows(working),
        *((r.text(), f"{r.source}; default {r.default}: {r.effect}") for r in spinning[:3]),
    ]
    if summary.external_runnable is not None:
        evidence.append(("other tasks runnable on the machine", f"{summary.external_runnable:.1f} on average"))
    if summary.libraries:
        evidence.append(("pool libraries mapped", ", ".join(summary.libraries)))
    yield Finding(
        rule_id="cpu-pool-spin", severity=Severity.WARNING if cost >= WARNING_COST else Severity.INFO,
        claim=claim, evidence=tuple(evidence),
        remedy="Let idle pool threads sleep: unset OMP_WAIT_POLICY (or set PASSIVE), leave GOMP_SPINCOUNT and "
               "KMP_BLOCKTIME at their defaults (or 0) where the cores are shared with other threads or processes; "
               "keep them out of the environment that child processes inherit.",
        impact=cost, stages=stages_of(working))


def _demand_text(summary: SchedSummary) -> str:
    """How many threads wanted a CPU on average, by kind: ``5.0 on 2 CPUs: Python 2.6, native pools 1.4, ...``."""
    return (f"{summary.demand:.1f} on {_cores_text(summary)}: Python {summary.python_demand:.1f}, native pools "
            f"{summary.native_demand:.1f}" + (f", children {summary.children_demand:.1f}" if summary.children_threads
                                               else ""))


def _own_share(summary: SchedSummary, excess: float) -> float:
    """Of the run delay, the part the process's own excess threads explain (the rest: other processes)."""
    if excess <= 0:
        return 0.0
    external = summary.external_runnable
    if external is None:
        return 1.0
    return excess / (excess + max(0.0, external))


def taker_cost(delay: float, taker_demand: float, summary: SchedSummary) -> float:
    """Of the working threads' wait for a CPU (``delay``), the part a taker of the CPUs explains: its part of the
    process's demand for the cores, times the process's part of the machine's runnable tasks (another process's load
    is not the taker's)."""
    if summary.demand <= 0:
        return 0.0
    external = summary.external_runnable or 0.0
    return delay * min(1.0, taker_demand / summary.demand) * summary.demand / (summary.demand + external)


def mean_delay(pairs: list[tuple[ThreadStats | None, ThreadSched]]) -> float:
    """The threads' mean share of the window runnable but waiting for a CPU (0 for none)."""
    return sum(t.runq_share for _, t in pairs) / len(pairs) if pairs else 0.0


def wait_rows(pairs: list[tuple[ThreadStats | None, ThreadSched]]) -> list[tuple[str, str]]:
    """Evidence: each thread's wait for a CPU and its time on one, the longest waits first."""
    return [(f"{t.name} (/proc)", f"waited for a CPU {pct(t.runq_share)}, on one {pct(t.cpu_share)}")
            for _, t in sorted(pairs, key=lambda p: -p[1].runq_share)[:MAX_NAMED]]


def stages_of(pairs: list[tuple[ThreadStats | None, ThreadSched]]) -> tuple[str, ...]:
    return tuple(sorted({s.stage for s, _ in pairs if s is not None} - {"other"}))


def thread_names(pairs: list[tuple[ThreadStats | None, ThreadSched]]) -> str:
    names = [t.name for _, t in pairs]
    return ", ".join(names[:MAX_NAMED]) + (f" and {len(names) - MAX_NAMED} more" if len(names) > MAX_NAMED else "")


def _rate(value: float | None) -> str:
    if value is None:
        return "?"
    return f"{value / 1000:.1f}k" if value >= 10_000 else f"{value:,.0f}"


# --- the process wants more CPUs than it has ----------------------------------------------------------------------


def _oversubscribed(ctx: Context, summary: SchedSummary,
                    working: list[tuple[ThreadStats | None, ThreadSched]]) -> Iterator[Finding]:
    cores = summary.cores
    pool_threads = summary.native_active + summary.children_threads
    pool_demand = summary.native_demand + summary.children_demand
    if summary.demand < OVERSUBSCRIBED_FACTOR * cores + 1 or pool_demand < POOL_DEMAND_CORES * cores \
            or pool_threads < POOL_THREADS_PER_CORE * cores:
        return
    # Who does the work: the process's computing threads; or, while its threads wait on its children (a pool of
    # worker processes), the children, whose run delay is then what the process waits for.
    by_children = not working and summary.children_demand >= POOL_DEMAND_CORES * cores and _waits_on_children(ctx)
    if not working and not by_children:
        return
    delay = summary.children_runq_share if by_children else mean_delay(working)
    if delay < RUN_DELAY_SHARE:
        return
    own = _own_share(summary, summary.demand - cores)
    cost = delay * own
    settings = by_area(non_default(ctx.obs), AREA_THREADS)
    pools = ", ".join(f"{p.threads} `{p.comm}`" for p in summary.pools[:3] if p.active)
    children = (f" and {summary.children_threads} in {_child_count(ctx)} child processes"
                if summary.children_threads else "")
    who = (f"its {summary.children} child processes, which do the work its threads wait for, waited for a CPU "
           f"{pct(delay)} of the time they were runnable" if by_children else
           f"{thread_names(working)}, which do the work, waited for a CPU {pct(delay)} of the window")
    claim = (f"the CPUs are oversubscribed: the process keeps {summary.demand:.1f} threads runnable on "
             f"{_cores_text(summary)}: {summary.native_active} busy native pool threads{children} (OpenMP/MKL "
             f"workers) beside its {summary.python_threads} Python threads, and {who}")
    if settings:
        claim += ", with " + ", ".join(_said(r) for r in _main_settings(settings)[:2])
    evidence = [
        ("threads runnable (demand)", _demand_text(summary)),
        ("OS threads", f"{summary.os_threads} ({summary.python_threads} Python, {summary.native_threads} native, "
                       f"{summary.native_active} of them ran)" + (f"; pools by name: {pools}" if pools else "")),
        ("context switches", f"{_rate(summary.voluntary_per_s)}/s voluntary, {_rate(summary.involuntary_per_s)}/s "
                             f"involuntary ({_rate((summary.switches_per_s or 0.0) / max(cores, 1.0))}/s per CPU)"),
    ]
    evidence += wait_rows(working)
    if summary.external_runnable is not None:
        evidence.append(("other tasks runnable on the machine", f"{summary.external_runnable:.1f} on average: the "
                                                                f"process's own excess explains {pct(own)} of the wait"))
    for r in settings[:4]:
        evidence.append((r.text(), f"{r.source}; default {r.default}: {r.effect}" + (f"; {r.detail}" if r.detail else "")))
    if summary.libraries:
        evidence.append(("pool libraries mapped", ", ".join(summary.libraries)))
    yield Finding(
        rule_id="cpu-oversubscribed",
        severity=Severity.WARNING if cost >= WARNING_COST else Severity.INFO,
        claim=claim,
        evidence=tuple(evidence),
        remedy="Size the thread pools to the cores: the threads that run torch ops at once times "
               "torch.get_num_threads() should not exceed the CPUs the process may use. Call torch.set_num_threads(N) "
               "once in the main thread (not in every worker thread), set OMP_NUM_THREADS/MKL_NUM_THREADS=1 for worker "
               "threads and processes, or run fewer threads that compute at once.",
        impact=cost,
        stages=stages_of(working),
    )


def _waits_on_children(ctx: Context) -> bool:
    chain = ctx.waits.chain
    return bool(chain) and chain[0].edge is not None and chain[0].edge.kind == WAIT_CHILD \
        and chain[0].edge.share >= RUN_DELAY_SHARE


def _main_settings(settings: tuple[SettingReading, ...]) -> list[SettingReading]:
    """The calls first (they say who and where), then the environment; a reading a call explains goes."""
    called = {r.name for r in settings if r.source == "call"}
    return sorted((r for r in settings if not (r.source == "probe" and r.name.replace("get_", "set_").rstrip("()")
                                               in called)), key=lambda r: r.source != "call")


def _said(r: SettingReading) -> str:
    return f"{r.text()} {r.detail}" if r.detail else f"{r.text()} ({r.source})"


def _child_count(ctx: Context) -> int:
    sweeps = [s for s in ctx.obs.sched if s.children]
    return len(sweeps[-1].children) if sweeps else 0


def _cores_text(summary: SchedSummary) -> str:
    text = f"{summary.cores:g} CPU{'s' if summary.cores != 1 else ''}"
    limits = []
    if summary.allowed_cpus and summary.allowed_cpus < summary.machine_cpus:
        limits.append(f"its affinity allows {summary.allowed_cpus} of the machine's {summary.machine_cpus}")
    if summary.quota_cores is not None and summary.quota_cores < max(summary.allowed_cpus, 1):
        limits.append(f"its cgroup's quota is {summary.quota_cores:g} CPUs")
    return text + (f" ({'; '.join(limits)})" if limits else "")


# --- a thread-count setting keeps torch's ops on fewer threads than the idle CPUs allow ----------------------------

# Their share of samples in torch's ops below which the setting is not said.
CAPPED_NOTE_SHARE = 0.10


def _threads_capped(ctx: Context, summary: SchedSummary,
                    working: list[tuple[ThreadStats | None, ThreadSched]]) -> Iterator[Finding]:
    """A pool-size setting (OMP_NUM_THREADS=1, torch.set_num_threads(1)) below the CPUs the process may use, while
    CPUs sit idle and the threads whose speed is the program's compute flat out in torch's ops: those ops run on
    that many threads where the idle CPUs could have shared them. Information, with the time in those ops and what a
    pool as wide as the CPUs could save at most (that time's part the idle CPUs could take, ``idle / (width +
    idle)``): a program that keeps itself to one thread on purpose (measurements, a process per core) looks the
    same, so it is never a warning; the stage verdict says it beside the time (``_context.caps_text``)."""
    cores = summary.cores
    if cores < 2 or ctx.on_cuda() is True or ctx.process_gpus():
        return
    idle = idle_cores(ctx.obs, summary)
    caps = thread_caps(by_area(non_default(ctx.obs), AREA_THREADS), cores)
    busy = [(s, t) for s, t in working if s is not None and t.cpu_share >= CAPPED_CPU_SHARE
            and speed_matters(ctx, s.name, s.stage.value)]
    if idle < IDLE_CORES or not caps or not busy:
        return
    share = ops_share_of(ctx, [s for s, _ in busy])
    if share < CAPPED_NOTE_SHARE:
        return
    reading, width = caps[0]
    names = thread_names(busy)
    one = len(busy) == 1
    cpu = sum(t.cpu_share for _, t in busy) / len(busy)
    saved = share * idle / (width + idle)
    claim = (f"{reading.text()} ({reading.source}) holds torch's ops to {width} thread{'s' if width != 1 else ''} "
             f"while {idle:.1f} of the {_cores_text(summary)} sit idle: {names} spend{'s' if one else ''} about "
             f"{pct(share)} of {'its' if one else 'their'} samples in those ops, on a CPU {pct(cpu)} of the window"
             + (f", and no native pool thread ran beside {'it' if one else 'them'}" if summary.native_active == 0
                else "")
             + f"; a pool as wide as the CPUs could save up to about {pct(saved)} of {'its' if one else 'their'} time")
    others = others_runnable(ctx.obs, summary)
    evidence = [(reading.text(), f"{reading.source}; default {reading.default}: {reading.effect}"
                                 + (f"; {reading.detail}" if reading.detail else "")),
                ("CPUs", f"the process may use {_cores_text(summary)}; it used {summary.used_cores:.1f} on average, "
                         f"other tasks on the machine wanted {others:.1f}"),
                ("OS threads", f"{summary.os_threads} ({summary.python_threads} Python, {summary.native_threads} "
                               f"native, {summary.native_active} of them ran)"),
                ("time in the ops it holds narrow", f"{pct(share)} of the samples of {names}")]
    evidence += [(r.text(), f"{r.source}; default {r.default}") for r, _ in caps[1:3]]
    yield Finding(
        rule_id="cpu-threads-capped", severity=Severity.INFO, claim=claim, evidence=tuple(evidence),
        remedy=(f"If the run has the machine to itself, let the pool use the CPUs: unset {reading.name} (or set it "
                "to the CPUs the process may use) where one thread does the math; keep it small where several "
                "threads or processes compute at once and together fill the CPUs."),
        impact=0.0, stages=stages_of(busy))


# --- threads pinned to fewer CPUs than the machine has ----------------------------------------------------------


def _narrow_affinity(ctx: Context, summary: SchedSummary,
                     working: list[tuple[ThreadStats | None, ThreadSched]]) -> Iterator[Finding]:
    for cpuset in summary.cpu_sets:
        excess = cpuset.demand - cpuset.cpu_count
        if excess < CPUSET_EXCESS:
            continue
        pinned = [(s, t) for s, t in working if t.cpus_allowed == cpuset.cpus]
        if not pinned:
            continue
        delay = mean_delay(pinned)
        if delay < RUN_DELAY_SHARE:
            continue
        external = summary.external_runnable
        # Other processes' load spreads over the machine: the set's part of it.
        external_here = None if external is None else external * cpuset.cpu_count / max(1, summary.machine_cpus)
        own = excess / (excess + max(0.0, external_here)) if external_here is not None else 1.0
        cost = delay * own
        whole = cpuset.threads >= summary.os_threads
        who = "the process" if whole else f"{cpuset.threads} of its {summary.os_threads} threads"
        settings = [r for r in by_area(non_default(ctx.obs), AREA_THREADS)
                    if any(w in r.name for w in ("AFFINITY", "PROC_BIND", "PLACES"))]
        claim = (f"{who} may run only on CPU{'s' if cpuset.cpu_count != 1 else ''} {cpuset.cpus} of the machine's "
                 f"{summary.machine_cpus}, where {cpuset.demand:.1f} threads want {cpuset.cpu_count}: "
                 f"{thread_names(pinned)} waited for a CPU {pct(delay)} of the window")
        if settings:
            claim += ", with " + ", ".join(r.text() for r in settings[:2])
        evidence = [("CPUs allowed", f"{cpuset.cpus} ({cpuset.cpu_count} of {summary.machine_cpus}) for "
                                     f"{cpuset.threads} threads"),
                    ("threads runnable on them", f"{cpuset.demand:.1f}")]
        for _, t in pinned[:MAX_NAMED]:
            evidence.append((f"{t.name} (/proc)", f"waited for a CPU {pct(t.runq_share)}, on one "
                                                      f"{pct(t.cpu_share)}, allowed {t.cpus_allowed}"))
        if external is not None:
            evidence.append(("other tasks runnable on the machine", f"{external:.1f} on average"))
        for r in settings:
            evidence.append((r.text(), f"{r.source}; default {r.default}: {r.effect}"))
        yield Finding(
            rule_id="cpu-affinity-narrow",
            severity=Severity.WARNING if cost >= WARNING_COST else Severity.INFO,
            claim=claim, evidence=tuple(evidence),
            remedy="Let the threads use the machine's CPUs: remove the pinning (taskset/numactl in the launcher, "
                   "os.sched_setaffinity, KMP_AFFINITY/GOMP_CPU_AFFINITY/OMP_PROC_BIND), or pin each process to its own "
                   "CPUs with no more threads than it has.",
            impact=cost, stages=stages_of(pinned))


# --- the cgroup's quota ------------------------------------------------------------------------------------------


def _throttled(ctx: Context, summary: SchedSummary) -> Iterator[Finding]:
    share, held_s = summary.throttled_share, summary.throttled_s
    if share is None or held_s is None or share < THROTTLED_PERIODS_SHARE or summary.window_s <= 0:
        return
    wanted_s = max(summary.demand, 1.0) * summary.window_s
    cost = min(1.0, held_s / wanted_s)
    if cost < THROTTLED_COST:
        return
    quota = f"{summary.quota_cores:g} CPUs" if summary.quota_cores is not None else "its CPU quota"
    claim = (f"the cgroup's CPU quota stops the process: it ran out of {quota} in {pct(share)} of the enforcement "
             f"periods and held its threads back {held_s:.1f} s of CPU in a {summary.window_s:.1f} s window, while "
             f"they wanted {summary.demand:.1f} CPUs")
    evidence = (("throttled periods", pct(share)), ("CPU time held back", f"{held_s:.2f} s"),
                ("quota", quota), ("threads runnable (demand)", f"{summary.demand:.1f}"),
                ("CPUs the affinity allows", str(summary.allowed_cpus)))
    yield Finding(
        rule_id="cpu-throttled", severity=Severity.WARNING, claim=claim, evidence=evidence,
        remedy="Give the container the CPUs its threads use (raise the CPU limit), or size the thread pools to the "
               "quota, not to the machine's CPUs (torch.set_num_threads, OMP_NUM_THREADS, DataLoader num_workers): "
               "os.cpu_count() sees the host.",
        impact=cost)


# --- pressure stall ---------------------------------------------------------------------------------------------


def _pressure(ctx: Context, summary: SchedSummary) -> Iterator[Finding]:
    d_share = _d_state_share(ctx)
    for resource, scope, share in summary.pressure:
        if resource not in ("memory", "io") or share < PRESSURE_SHARE:
            continue
        own = scope == "cgroup" or d_share >= D_STATE_SHARE
        if not own:
            continue  # the machine's stalls, none of them this process's: other processes' business
        what = "memory (reclaim, swap)" if resource == "memory" else "I/O"
        where = "its cgroup" if scope == "cgroup" else "the machine"
        claim = (f"tasks of {where} stalled on {what} {pct(share)} of the window"
                 + (f", the process's own threads among them (in the kernel, state D, {pct(d_share)} of their "
                    "readings)" if d_share >= D_STATE_SHARE else ""))
        evidence = [(f"{resource} pressure ({scope})", f"some {pct(share)} of the window"),
                    ("threads in state D", pct(d_share))]
        remedy = ("Free memory: a smaller batch or cache, fewer DataLoader workers (each holds its own copy), no swap "
                  "for the trainer; `dmesg` says when the kernel reclaimed." if resource == "memory" else
                  "Move the reads off the slow device (local NVMe, a page-cache-warm copy), read fewer, larger files, "
                  "or prefetch them on a thread that does nothing else.")
        yield Finding(rule_id=f"{resource}-pressure", severity=Severity.WARNING if own else Severity.INFO,
                      claim=claim, evidence=tuple(evidence), remedy=remedy, impact=share if own else 0.0)


def _d_state_share(ctx: Context) -> float:
    readings = [t for sweep in ctx.obs.proc for t in sweep]
    return sum(1 for t in readings if t.state == "D") / len(readings) if readings else 0.0


# --- children started over and over ------------------------------------------------------------------------------


def _churn(ctx: Context, summary: SchedSummary) -> Iterator[Finding]:
    started, rate = summary.children_started, summary.children_started_per_s
    if started < CHURN_MIN or rate < CHURN_PER_S:
        return
    chain = ctx.waits.chain
    first = chain[0] if chain else None
    wait = first.edge.share if first is not None and first.edge is not None and first.edge.kind == WAIT_CHILD else 0.0
    comms = sorted({c.comm for s in ctx.obs.sched for c in s.children})
    claim = (f"the process starts {rate:.1f} child processes a second ({started} in {summary.window_s:.0f} s: "
             f"{', '.join(comms[:3]) or '?'})")
    if first is not None and wait > 0:
        claim += f", and {', '.join(first.threads[:3])} wait{'s' if len(first.threads) == 1 else ''} on children " \
                 f"{pct(wait)} of the time"
    evidence = [("children started", f"{started} in {summary.window_s:.1f} s"),
                ("children's CPU demand", f"{summary.children_demand:.2f} CPUs")]
    if first is not None and first.edge is not None and wait > 0:
        evidence.append(("training threads wait on children", f"{pct(wait)} at {first.edge.site or '?'}"))
    yield Finding(
        rule_id="process-churn", severity=Severity.WARNING if wait >= CHURN_WAIT_SHARE else Severity.INFO,
        claim=claim, evidence=tuple(evidence),
        remedy="Start workers once and keep them (DataLoader(persistent_workers=True), one multiprocessing Pool for "
               "the run, a long-lived subprocess instead of one per step); move start-up work out of each child.",
        impact=wait)


# --- a thread the scheduler puts behind the others ----------------------------------------------------------------


def _waited_part(t: ThreadSched) -> float:
    """Of the time the thread wanted a CPU, the part it waited for one."""
    return t.runq_share / t.demand if t.demand > 0 else 0.0


def _deprioritized(ctx: Context, summary: SchedSummary) -> Iterator[Finding]:
    threads = [t for t in summary.threads if not t.name.startswith("dflash-diag-")]
    normal = sorted(_waited_part(t) for t in threads if not t.deprioritized and t.demand >= WORKING_SHARE / 2)
    baseline = normal[len(normal) // 2] if normal else None
    stats_by_tid = {t.os_thread_id: t for t in ctx.threads if t.os_thread_id is not None}
    trains = set(ctx.waits.trains)
    limiting = ctx.pipeline.bottleneck
    for t in threads:
        if not t.deprioritized or t.runq_share < DEPRIORITIZED_WAIT_SHARE:
            continue
        if baseline is not None and _waited_part(t) < baseline:
            continue
        stats = stats_by_tid.get(t.tid)
        stage = stats.stage if stats is not None else None
        leads = t.name in trains or (stage is not None and stage.value == limiting)
        claim = (f"{t.name} runs at {t.priority_text()} (the default is nice 0, SCHED_OTHER): the scheduler gives it "
                 f"a CPU after the default-priority threads, and it waited for one {pct(t.runq_share)} of the window, "
                 f"{pct(_waited_part(t))} of the time it wanted one")
        if baseline is not None:
            claim += f" (the process's default-priority threads: {pct(baseline)})"
        evidence = [(f"{t.name} (/proc)", f"{t.priority_text()}; waited for a CPU {pct(t.runq_share)}, on one "
                                          f"{pct(t.cpu_share)} of the window")]
        for other in sorted((o for o in threads if not o.deprioritized and o.demand >= WORKING_SHARE / 2),
                            key=lambda o: -o.demand)[:MAX_NAMED - 1]:
            evidence.append((f"{other.name} (/proc)", f"{other.priority_text()}; waited {pct(other.runq_share)}, on "
                                                      f"a CPU {pct(other.cpu_share)}"))
        if summary.external_runnable is not None:
            evidence.append(("other tasks runnable on the machine", f"{summary.external_runnable:.1f} on average"))
        if stage is not None and stage.value == limiting:
            evidence.append(("its stage", f"{stage_label(ctx, stage)}: the one that limits throughput"))
        yield Finding(
            rule_id="thread-deprioritized",
            severity=Severity.WARNING if leads else Severity.INFO,
            claim=claim, evidence=tuple(evidence),
            remedy="Run the thread at the default priority: remove the os.setpriority/os.nice/sched_setscheduler call "
                   "(often in a library that lowers its own threads' priority, or `nice`/`chrt` in the launcher), "
                   "or give the machine spare cores so a background priority costs nothing.",
            impact=t.runq_share if leads else 0.0,
            stages=(stage.value,) if stage is not None and stage.value != "other" else ())


# --- a child process that runs Python in a debug mode -----------------------------------------------------------

# A child in a debug mode must want at least this many CPUs over the window (on one, or waiting for one: on a
# crowded machine a busy child waits as much as it runs) to be weighed.
CHILD_DEBUG_CORES = 0.3


def _python_debug_mode(e: EnvSetting) -> str | None:
    """What a variable of a child's environment turns on that slows the Python it runs; None when nothing."""
    value = e.value.strip()
    if e.name == "PYTHONASYNCIODEBUG" and value:
        return "asyncio's debug mode: a creation traceback for every callback handle and Task, slow-callback timing"
    if e.name == "PYTHONDEVMODE" and value:
        return "the development mode: debug allocator hooks and extra checks on every allocation"
    if e.name == "PYTHONMALLOC" and value in DEBUG_ALLOCATORS:
        return "the debug allocator: every allocation checked and padded"
    if e.name == "PYTHONTRACEMALLOC" and value.isdigit() and int(value) > 0:
        return "tracemalloc from the start: a traceback recorded for every allocation"
    return None


def _child_debug(ctx: Context, summary: SchedSummary,
                 working: list[tuple[ThreadStats | None, ThreadSched]]) -> Iterator[Finding]:
    """A child process started with a Python debug mode (an inherited PYTHONASYNCIODEBUG, PYTHONDEVMODE, a debug
    allocator) burns the CPUs the process's working threads wait for. The parent's own settings may look the same
    or clean: what matters is the process that burns the CPU. The cost is the working threads' run delay times that
    child's share of the demand and the process's own share of the wait (as for cpu-oversubscribed)."""
    facts = ctx.obs.os_facts
    if facts is None or not facts.children_env or not working:
        return
    modes: dict[int, list[tuple[EnvSetting, str]]] = {}
    for e in facts.children_env:
        what = _python_debug_mode(e)
        if what is not None and e.where.startswith("child "):
            pid = e.where.removeprefix("child ")
            if pid.isdigit():
                modes.setdefault(int(pid), []).append((e, what))
    burning = [load for load in child_loads(list(ctx.obs.sched)) if load.pid in modes and
               load.demand >= CHILD_DEBUG_CORES]
    delay = mean_delay(working)
    if not burning or delay < RUN_DELAY_SHARE:
        return
    child = max(burning, key=lambda load: load.demand)
    child_part = child.demand / summary.demand if summary.demand > 0 else 0.0
    cost = delay * child_part * _own_share(summary, summary.demand - summary.cores)
    settings = modes[child.pid]
    said = ", ".join(f"{e.name}={e.value} ({what})" for e, what in settings[:2])
    yield Finding(
        rule_id="child-debug-mode", severity=Severity.WARNING if cost >= WARNING_COST else Severity.INFO,
        claim=(f"its child process {child.pid} (`{child.comm}`) runs Python in a debug mode, {said}, and wanted "
               f"{child.demand:.1f} of the {_cores_text(summary)} while {thread_names(working)}, which do the work, waited "
               f"for a CPU {pct(delay)} of the window"),
        evidence=(
            (f"child {child.pid} (`{child.comm}`)", f"on a CPU {child.used:.2f} CPUs on average, wanted {child.demand:.2f}"),
            *((f"{e.name}={e.value}", f"environment of child {child.pid}; default {_default_of(e.name)}: {what}")
              for e, what in settings[:3]),
            ("threads runnable (demand)", _demand_text(summary)),
            *wait_rows(working),
        ),
        remedy=("Start the child without the debug mode: remove the variable from the environment it inherits (set "
                "it, if needed, only for the processes you debug: `env={**os.environ}` without it, or "
                "`os.environ.pop(...)` before the child starts)."),
        impact=cost, stages=stages_of(working))


# --- a child meant to run behind the process whose lowered priority the scheduler does not see -------------------

# A lowered-priority child is weighed when it used at least this many CPUs over the window.
CHILD_TAKER_CORES = 0.3


def _child_priority_lost(ctx: Context, summary: SchedSummary,
                         working: list[tuple[ThreadStats | None, ThreadSched]]) -> Iterator[Finding]:
    """A child started at a lowered priority (nice above 0, SCHED_BATCH/IDLE: a background evaluator, an exporter)
    in a session of its own while autogroup scheduling is on: the kernel makes every session a CFS group of its own,
    shares the CPUs between the groups first and weighs a nice value only against the tasks of the same group, so
    the child's group gets as much as the process's whole session. Measured, not assumed: the child got a CPU for as
    large a part of the time it wanted one as the process's working threads did, while they waited for one. The
    cost is their run delay times the child's part of the demand and the process's own part of the wait."""
    facts = ctx.obs.os_facts
    if facts is None or facts.autogroup_enabled is not True or not facts.autogroup or not working:
        return
    delay = mean_delay(working)
    if delay < RUN_DELAY_SHARE:
        return
    got = sum(t.cpu_share for _, t in working) / max(1e-9, sum(t.demand for _, t in working))
    apart = [load for load in child_loads(list(ctx.obs.sched))
             if load.last is not None and load.last.deprioritized and load.last.autogroup
             and load.last.autogroup != facts.autogroup and load.used >= CHILD_TAKER_CORES and load.got_share >= got]
    if not apart:
        return
    child = max(apart, key=lambda load: load.used)
    assert child.last is not None
    child_part = child.demand / summary.demand if summary.demand > 0 else 0.0
    cost = delay * child_part * _own_share(summary, summary.demand - summary.cores)
    session = (f"session {child.last.session}" if child.last.session is not None else "a session") + (
        f", not the process's {facts.session}" if facts.session is not None else "")
    # A child that called setsid leads its session (its ID is the child's PID); else it joined one another started.
    where = ("leads a session of its own" if child.last.session == child.pid else "runs in another session")
    yield Finding(
        rule_id="child-priority-lost", severity=Severity.WARNING if cost >= WARNING_COST else Severity.INFO,
        claim=(f"its child process {child.pid} (`{child.comm}`) runs at {child.last.priority_text()}, to run behind "
               f"the process's threads, yet it got a CPU {pct(child.got_share)} of the time it wanted one ("
               f"{child.used:.2f} CPUs on average) while {thread_names(working)}, which {'does' if len(working) == 1 else 'do'} "
               f"the work, got one {pct(got)} of "
               f"the time and waited for one {pct(delay)} of the window: the child {where} ({session}: what "
               "setsid and start_new_session=True start), and with autogroup scheduling on, the kernel weighs that "
               "session's group like the process's whole session; its priority only ranks it inside its own group"),
        evidence=(
            (f"child {child.pid} (`{child.comm}`)", f"{child.last.priority_text()}; {child.last.autogroup}, "
                                                    f"{session}; on a CPU {child.used:.2f} CPUs on average, wanted "
                                                    f"{child.demand:.2f}"),
            ("the process", f"{facts.autogroup}" + (" (the kernel's default group)" if facts.autogroup == "autogroup-0"
                                                    else "")
             + (f", session {facts.session}" if facts.session is not None else "")),
            ("kernel.sched_autogroup_enabled", "1: each session is a scheduling group of its own"),
            ("threads runnable (demand)", _demand_text(summary)),
            *wait_rows(working),
        ),
        remedy=("Keep the child in the process's session (drop start_new_session=True / setsid) so its priority "
                "weighs against the process's threads, or lower its group's weight as well: write the nice value "
                f"to /proc/{child.pid}/autogroup (`echo 10 > /proc/PID/autogroup`), or give it a cgroup with a "
                "small cpu.weight."),
        impact=cost, stages=stages_of(working))


# --- a child at work on the process's own /proc entries (a memory telemetry or monitoring child) ------------------

# What reading or writing an entry of /proc/PID/ makes the kernel do to that process (proc(5)). The cheap ones (status,
# stat, io) are not listed: a child holding them open is named, its cost is the CPU it takes.
PROC_ENTRY_EFFECTS = {
    "clear_refs": "each write of 1 to 4 walks every page table of this process under its memory-map lock, clears "
                  "the pages' accessed or soft-dirty bits and flushes its TLB",
    "smaps": "each read walks every page table of this process under its memory-map lock",
    "smaps_rollup": "each read walks every page table of this process under its memory-map lock",
    "numa_maps": "each read walks every page table of this process under its memory-map lock",
    "pagemap": "each read walks the page tables of the range it reads",
    "mem": "reads or writes this process's memory through the kernel",
    "maps": "each read lists this process's mappings under its memory-map lock",
}
# A child is said at work on the process from this much CPU (cores, over the window) with one of the process's
# /proc entries open in at least one sweep; it is the cause, a warning, where the threads that do the work waited
# for a CPU WATCHER_DELAY_SHARE of the window and its part of that wait is WARNING_COST or more.
WATCHER_CORES = 0.1
WATCHER_DELAY_SHARE = 0.10
# The system calls that take a process's memory-map lock for writing: a thread blocked in one waits behind a walk.
_MAP_LOCK_CALLS = frozenset({"brk", "mmap", "munmap", "mremap", "mprotect", "madvise"})


def _child_watches(ctx: Context, summary: SchedSummary,
                   working: list[tuple[ThreadStats | None, ThreadSched]]) -> Iterator[Finding]:
    """A child that holds the process's own /proc entries open (``ChildSched.watching``) while it takes CPU: a
    memory telemetry or monitoring child sampling this process. Reading smaps or writing clear_refs makes the kernel
    walk every page table of this process, in the child's time but under this process's memory-map lock, so the
    child's CPU goes to the kernel and the working threads wait for the CPUs it takes. Measured: the working threads'
    run delay, the child's part of the demand for the cores, its kernel share."""
    watchers = [load for load in child_loads(list(ctx.obs.sched)) if load.watching and load.used >= WATCHER_CORES]
    if not watchers:
        return
    child = max(watchers, key=lambda load: load.used)
    delay = mean_delay(working)
    # The child's part of the threads' wait for a CPU: its part of the process's demand for the cores (the process
    # near its cores, the wait comes and goes with the child's walks; other processes' load is not the child's).
    cost = taker_cost(delay, child.demand, summary) if delay >= WATCHER_DELAY_SHARE else 0.0
    entries = [entry for entry, _ in child.watching]
    costly = [entry for entry in entries if entry in PROC_ENTRY_EFFECTS]
    pid = ctx.obs.pid
    opened = ", ".join(f"/proc/{pid}/{entry}" for entry in entries[:3])
    where = child_site(ctx, child.pid)
    kernel = f", {pct(child.kernel_share)} of it in the kernel" if child.kernel_share is not None else ""
    claim = (f"its child process {child.pid} (`{child.comm}`){where} works on this process: it holds {opened} open "
             f"and takes {child.used:.2f} CPUs{kernel}")
    if costly:
        claim += f" ({costly[0]}: {PROC_ENTRY_EFFECTS[costly[0]]})"
    if working and delay >= WATCHER_DELAY_SHARE:
        claim += f"; {thread_names(working)} waited for a CPU {pct(delay)} of the window"
        readings, calls = blocked_in(ctx.obs, [t.tid for _, t in working])
        mapping = sum(n for call, n in calls.items() if call in _MAP_LOCK_CALLS)
        if mapping:
            claim += (f" and {'was' if len(working) == 1 else 'were'} blocked in calls that take its memory-map "
                      f"lock ({', '.join(c for c in calls if c in _MAP_LOCK_CALLS)}) in {mapping} of {readings} "
                      "readings")
    evidence = [(f"child {child.pid} (`{child.comm}`)", f"on a CPU {child.used:.2f} CPUs on average, wanted "
                                                        f"{child.demand:.2f}{kernel}")]
    evidence += [(f"/proc/{pid}/{entry}", f"open in {seen} of {child.sweeps} sweeps"
                  + (f": {PROC_ENTRY_EFFECTS[entry]}" if entry in PROC_ENTRY_EFFECTS else ""))
                 for entry, seen in child.watching[:4]]
    evidence += [("threads runnable (demand)", _demand_text(summary)), *wait_rows(working)]
    yield Finding(
        rule_id="child-watches-process", severity=Severity.WARNING if cost >= WARNING_COST else Severity.INFO,
        claim=claim, evidence=tuple(evidence),
        remedy=("Sample this process less often or more cheaply: read status or statm (RSS) rather than smaps, "
                "estimate the working set rarely (clear_refs and smaps walk every page table), or run the monitor "
                "at a lower priority on a CPU the training threads do not use."),
        impact=cost, stages=stages_of(working) if cost >= WARNING_COST else ())


def child_site(ctx: Context, child_pid: int) -> str:
    """" at main (memwatch.py:66)": the child's own line its sampled stacks are at most often; "" when not sampled."""
    counts: Counter[str] = Counter()
    for sample in ctx.obs.children:
        if sample.pid != child_pid:
            continue
        for thread in sample.threads:
            own = own_frame(thread)
            if own is not None:
                counts[f"{own.name} ({own.short_filename}:{own.line})"] += 1
    return f" at {counts.most_common(1)[0][0]}" if counts else ""


def _default_of(name: str) -> str:
    var = ENV_BY_NAME.get(name)
    return var.default if var is not None else "unset"


# --- a thread whose CPU goes to the kernel: faulting pages in, or system calls ---------------------------------

# A thread's CPU goes to the kernel when, over the window, it spent at least this part of its CPU time there and
# at least this many CPUs. It is faulting its memory in when it also took this many page faults a second; else
# its kernel time is system calls (or kernel work they start: copies, syncs, scheduling).
FAULTS_PER_S = 5_000.0
KERNEL_SHARE = 0.4
KERNEL_CORES = 0.1
# Faulting memory in this fast, a thread with this much CPU in the kernel, and this part of its own, is named too: a
# compute-heavy thread (a trainer) hides kernel time that is large in itself (healthy programs here: up to 0.16 CPUs).
FAULTS_HEAVY_PER_S = 50_000.0
KERNEL_CORES_FAULTING = 0.25
KERNEL_SHARE_FAULTING = 0.25
# System calls are named only for a thread py-spy sees (a Python thread: a device driver's or a pool's own thread
# makes its calls by design), and only from this cost: a thread's kernel time below it is the program's I/O.
KERNEL_TIME_MIN_COST = 0.02
# Clock sources whose reads stay in user space (the vDSO); any other makes every clock read a system call.
_FAST_CLOCKS = frozenset({"tsc", "arch_sys_counter", "kvm-clock", "hyperv_clocksource_tsc_page"})


class _KernelHeavy:
    def __init__(self, tid: int, name: str, stage: str, minor_per_s: float, major_per_s: float, kernel_cpus: float,
                 cpu: float) -> None:
        self.tid, self.name, self.stage = tid, name, stage
        self.minor_per_s, self.major_per_s, self.kernel_cpus, self.cpu = minor_per_s, major_per_s, kernel_cpus, cpu

    @property
    def faults_per_s(self) -> float:
        return self.minor_per_s + self.major_per_s


def _kernel_heavy_threads(ctx: Context, *, faulting: bool = False) -> list[_KernelHeavy]:
    """Every thread that spent a large part of its CPU in the kernel over the window (its task stat's stime), with
    its page faults, heaviest first. The tool's own threads are left out. ``faulting``: also a thread that faults
    memory in at a high rate with a quarter of a CPU in the kernel, whatever its own code's part (its compute hides
    a kernel time that is large in itself)."""
    stats = {t.os_thread_id: t for t in ctx.threads if t.os_thread_id is not None}
    out = []
    for r in thread_rates(ctx.obs):
        heavy_faults = faulting and r.minor_per_s + r.major_per_s >= FAULTS_HEAVY_PER_S and \
            r.kernel_cpus >= KERNEL_CORES_FAULTING and r.kernel_cpus >= KERNEL_SHARE_FAULTING * r.cpu
        if not heavy_faults and (r.kernel_cpus < KERNEL_CORES or r.kernel_cpus < KERNEL_SHARE * r.cpu):
            continue
        stat = stats.get(r.tid)
        name = stat.name if stat is not None else r.comm
        if name.startswith("dflash-diag-"):
            continue
        out.append(_KernelHeavy(r.tid, name, stat.stage.value if stat is not None else "other", r.minor_per_s,
                                r.major_per_s, r.kernel_cpus, r.cpu))
    return sorted(out, key=lambda f: -f.kernel_cpus)


def _kernel_cost(ctx: Context, summary: SchedSummary, working: list[tuple[ThreadStats | None, ThreadSched]],
                 f: _KernelHeavy) -> tuple[float, str, tuple[str, ...]]:
    """(cost, why, stages) of a thread's kernel time: the share of the window it spent there where its speed is
    the program's; else, where the threads that train wait for a CPU, the part of that wait its kernel time
    explains (its share of the demand, the process's own share)."""
    stages: tuple[str, ...] = tuple(s for s in (f.stage,) if s != "other")
    if speed_matters(ctx, f.name, f.stage):
        return f.kernel_cpus, "", stages  # the time it spends in the kernel is the program's time
    others = [(s, t) for s, t in working if t.name != f.name]
    delay = mean_delay(others)
    part = f.kernel_cpus / summary.demand if summary.demand > 0 else 0.0
    cost = delay * part * _own_share(summary, summary.demand - summary.cores) if delay >= RUN_DELAY_SHARE else 0.0
    why = f"{thread_names(others)} waited for a CPU {pct(delay)} of the window" if others else ""
    # Its cost is the CPU the others wait for: it explains their stage's slowness.
    return cost, why, (stages_of(others) if cost > 0 else stages)


def _page_faults(ctx: Context, summary: SchedSummary,
                 working: list[tuple[ThreadStats | None, ThreadSched]]) -> Iterator[Finding]:
    """A thread spends its CPU in the kernel faulting memory in: fresh buffers every step (each 4 KiB page of a new
    mapping is a fault when no huge page backs it), or pages read back from disk."""
    facts = ctx.obs.os_facts
    thp = facts.thp_mode if facts is not None else ""
    for f in [f for f in _kernel_heavy_threads(ctx, faulting=True) if f.faults_per_s >= FAULTS_PER_S][:1]:
        cost, why, stages = _kernel_cost(ctx, summary, working, f)
        kind = ("major (read from disk or swap)" if f.major_per_s >= f.minor_per_s else
                "minor (memory touched for the first time)")
        pages = {"madvise": "transparent huge pages are `madvise` on this machine: memory the program does not "
                            "advise (MADV_HUGEPAGE) is faulted in 4 KiB pages, one fault each",
                 "never": "transparent huge pages are off on this machine: every 4 KiB page is a fault"}.get(thp, "")
        settings = _memory_settings_text(ctx)
        # A warning needs something set that makes the faults: an allocator setting, huge pages off, or reads from
        # disk or swap. Minor faults under the machine's default huge-page mode and the default allocator are the
        # program's own allocation pattern (fresh buffers every step, as its healthy twin makes them): said, with
        # their cost, as information.
        explained = bool(settings) or thp == "never" or f.major_per_s >= f.minor_per_s
        claim = (f"{f.name} spends its CPU faulting memory in: {f.kernel_cpus:.2f} of its {f.cpu:.2f} CPUs in the "
                 f"kernel, {_rate(f.faults_per_s)} page faults a second, mostly {kind}"
                 + (f"; {pages}" if pages and f.minor_per_s >= f.major_per_s else "")
                 + settings
                 + ("" if explained else "; none of the allocator or huge-page settings read here (the process's "
                    "environment, the machine's huge-page mode) explains it: fresh buffers every step, as a healthy "
                    "program makes them, or an allocator setting made in its code (mallopt) that no reading shows")
                 + (f"; {why}" if why else ""))
        evidence = [(f"{f.name} (/proc)", f"{_rate(f.minor_per_s)} minor and {_rate(f.major_per_s)} major faults a "
                                          f"second; {f.kernel_cpus:.2f} CPUs in the kernel, {f.cpu - f.kernel_cpus:.2f} "
                                          "in its own code")]
        if thp:
            evidence.append(("transparent huge pages", thp))
        yield Finding(
            rule_id="page-faults", severity=Severity.WARNING if cost >= WARNING_COST and explained else Severity.INFO,
            claim=claim, evidence=tuple(evidence),
            remedy=("Stop faulting fresh memory in every step: reuse buffers (preallocate, write with out=, keep a "
                    "pool), or let huge pages back large buffers (numpy's huge-page hint on, madvise(MADV_HUGEPAGE), "
                    "or transparent huge pages `always`); for major faults, keep the data in memory or read it "
                    "ahead."),
            impact=cost, stages=stages)


def _kernel_time(ctx: Context, summary: SchedSummary,
                 working: list[tuple[ThreadStats | None, ThreadSched]]) -> Iterator[Finding]:
    """A thread spends its CPU in the kernel without faulting memory in: system calls in a loop (unbuffered small
    writes, a sync per write, polling, yielding, clock reads the vDSO cannot serve). What stacks show is an
    ordinary Python line; /proc's user and kernel times tell them apart. What it was seen blocked in, its hottest
    line and the machine's clock source are said with it: the tool cannot count system calls from outside."""
    facts = ctx.obs.os_facts
    clock = facts.clocksource if facts is not None else ""
    python = {t.os_thread_id for t in ctx.threads if t.n_samples}
    for f in [f for f in _kernel_heavy_threads(ctx) if f.faults_per_s < FAULTS_PER_S and f.tid in python][:1]:
        cost, why, stages = _kernel_cost(ctx, summary, working, f)
        per_call = _kernel_per_call(ctx)
        cheap = per_call is not None and per_call[2] < CHEAP_CALL_RATIO
        waste = _excess_kernel_cost(ctx, summary, working, f, per_call)
        if waste is not None and waste[0] > cost:
            cost, why, stages = waste
        if cost < KERNEL_TIME_MIN_COST:
            continue
        # A thread that drives a GPU: the driver's launches and waits (ioctl, sched_yield while it spins on a sync,
        # futex) are kernel time too, which no system call of the program's own explains.
        driver = (ctx.on_cuda() is True or bool(ctx.process_gpus())) and f.name in ctx.waits.trains
        kernel_controls = by_area(non_default(ctx.obs), AREA_KERNEL)
        calls = _syscalls_seen(ctx, f.tid)
        line = _hot_line(ctx, f.tid)
        reopened = reopened_text(reopened_files(ctx.obs))
        # Socket calls (recv, send, accept) are not read or write calls to the process's I/O counters: where its hot
        # line is one and the counters saw few calls, how many it makes and what each costs is not known here.
        uncounted = per_call is None and bool(_SOCKET_CALL.search(line))
        slow_clock = bool(clock) and clock not in _FAST_CLOCKS
        # doctor's native look, where taken: the C library calls its samples end in, and what the C library does there
        libc = libc_text(ctx, {f.tid})
        claim = (f"{f.name} spends its CPU in the kernel, not in its own code: {f.kernel_cpus:.2f} of its "
                 f"{f.cpu:.2f} CPUs in system calls ({_rate(f.faults_per_s)} page faults a second: not faulting "
                 "memory in)"
                 + (f"; its most frequent line: {line}" if line else "")
                 + (f"; /proc saw it blocked in {calls}" if calls else "")
                 + storage_settings_text(ctx.obs, (f.tid,))
                 + (f"; the machine's clock source is `{clock}`: every clock read (time.time(), perf_counter) is a "
                    "system call" if slow_clock else "")
                 + _sync_files_text(ctx, line)
                 + (f"; {reopened}" if reopened else "")
                 + _memory_settings_text(ctx)
                 + _per_call_text(per_call)
                 + ("; its line calls a socket, and socket calls are not in the process's read and write counts: how "
                    "many it makes and what each costs is not known from outside" if uncounted else "")
                 + _socket_poll_text(ctx, f.tid, line)
                 + (f"; {libc}" if libc else "")
                 + _kernel_controls_text(kernel_controls, line)
                 + ("; it drives the GPU: the CUDA driver's launches and waits (ioctl, yields while it spins on a "
                    "sync) are kernel time too" if driver else "")
                 + (f"; {why}" if why else ""))
        evidence = [(f"{f.name} (/proc)", f"{f.kernel_cpus:.2f} CPUs in the kernel, {f.cpu - f.kernel_cpus:.2f} in "
                                          f"its own code; {_rate(f.faults_per_s)} page faults a second")]
        if calls:
            evidence.append(("system calls it was seen blocked in", calls))
        if reopened:
            evidence.append(("files opened again and again (/proc/PID/fd)", reopened.removeprefix("the process ")))
        if clock:
            evidence.append(("clock source", clock))
        evidence.extend((r.text(), f"{r.effect}; default {r.default}") for r in kernel_controls)
        if per_call is not None:
            evidence.append(("kernel time per read or write call", f"{per_call[1]:.1f} µs over {per_call[0]:,.0f} "
                                                                     f"calls a second; a small cached read here: "
                                                                     f"{per_call[3]:.2f} µs"))
        yield Finding(
            rule_id="kernel-time",
            severity=Severity.WARNING if cost >= WARNING_COST and not cheap and not driver and not uncounted
            else Severity.INFO,
            claim=claim, evidence=tuple(evidence),
            # its system calls are made below its Python lines: only native stacks name them (doctor's look)
            looks_below=(f.tid,) if ctx.obs.native is None else (),
            remedy=("Find the system call it makes in a loop (`strace -c -f -p TID` for a few seconds) and batch it: "
                    "buffer small writes (no buffering=0, no flush per line), no sync per write (O_SYNC/O_DSYNC, "
                    "os.fsync), no polling with sleep(0)/select or yielding in a loop, no read of /dev/urandom per "
                    "sample; where clock reads are system calls, read the clock less often or use the TSC clock "
                    "source."
                    + (" Where seccomp filters run on every call, filter on the system call's number only (the kernel "
                       "then caches the verdict) or install fewer."
                       if any(r.name.startswith("seccomp") for r in kernel_controls) else "")),
            impact=cost, stages=stages)


# A line of the program's that makes a socket call (the receive and send families, accept, connect).
_SOCKET_CALL = re.compile(r"\b(recv|recv_into|recvfrom|recvfrom_into|recvmsg|send|sendall|sendto|sendmsg|accept|"
                          r"connect)\(")


# CPython's socket module waits for the descriptor (poll) before each call on a socket that has a timeout
# (socket.settimeout, or socket.setdefaulttimeout before it was made): internal_select, called from sock_call_ex.
_SOCKET_POLL = re.compile(r"^internal_select$")
SOCKET_POLL_SHARE = 0.1  # of the thread's native samples: the polls are a part of its time worth saying


def _socket_poll_text(ctx: Context, tid: int | None, line: str) -> str:
    """"; N% of its native samples poll the socket before the call ..." where the native stacks (doctor's look) show
    CPython polling a socket with a timeout at this thread's socket line; "" otherwise."""
    if tid is None or ctx.obs.native is None or not _SOCKET_CALL.search(line):
        return ""
    share, samples = share_in(thread_stacks(ctx.obs.native, {tid}), _SOCKET_POLL, waits=True)
    if samples < MIN_SAMPLES or share < SOCKET_POLL_SHARE:
        return ""
    return (f"; {pct(share)} of its native samples poll the socket before the call (CPython's internal_select): the "
            "socket has a timeout (socket.settimeout(), or socket.setdefaulttimeout() before it was created), so "
            "every call is a poll, then the call, each releasing and taking back the GIL; a socket without a timeout "
            "(blocking, settimeout(None)) makes one system call")


def _memory_settings_text(ctx: Context) -> str:
    """The allocator settings away from their defaults (glibc malloc's thresholds, a preloaded allocator...): what
    decides how often memory goes back to the kernel and comes back, said beside the kernel time they can make."""
    settings = by_area(non_default(ctx.obs), AREA_MEMORY)
    if not settings:
        return ""
    shown = ", ".join(f"{r.text()} ({r.effect}; default {r.default})" for r in settings[:3])
    return f"; the process's allocator settings: {shown}"


# The process's read and write calls a second from which its kernel time per call is read, and the ratio to this
# machine's own small cached read under which the calls are as cheap as they come (many, not costly: the program's
# own pattern, said as information), or from which each call costs more than it should (something the kernel does
# on every call: filters, watches, a slow file system).
PER_CALL_MIN_CALLS_PER_S = 10_000.0
CHEAP_CALL_RATIO = 2.0
COSTLY_CALL_RATIO = 3.0


def _excess_kernel_cost(ctx: Context, summary: SchedSummary, working: list[tuple[ThreadStats | None, ThreadSched]],
                        f: _KernelHeavy, per_call: tuple[float, float, float, float] | None
                        ) -> tuple[float, str, tuple[str, ...]] | None:
    """(cost, why, stages) of the kernel time a thread spends beyond what its calls cost on this machine, where each
    call costs 3x the yardstick or more and the threads that compute wait for a CPU: that excess is CPU they wait for
    (at most their wait, at most its share of the process's CPUs). None where it does not apply."""
    if per_call is None or per_call[2] < COSTLY_CALL_RATIO or speed_matters(ctx, f.name, f.stage):
        return None
    others = [(st, t) for st, t in working if t.name != f.name]
    delay = mean_delay(others)
    if delay < RUN_DELAY_SHARE or summary.cores <= 0:
        return None
    excess_cpus = f.kernel_cpus * (1.0 - 1.0 / per_call[2])
    why = (f"{thread_names(others)} waited for a CPU {pct(delay)} of the window, and {excess_cpus:.2f} of its CPUs in the "
           "kernel are beyond what its calls cost on this machine")
    return min(delay, excess_cpus / summary.cores), why, stages_of(others)


def _kernel_per_call(ctx: Context) -> tuple[float, float, float, float] | None:
    """(read and write calls a second, the process's kernel µs per call, its ratio to this machine's small cached
    read, that read's µs) over the window; None where the counters or the yardstick are missing, or calls few."""
    facts = ctx.obs.os_facts
    baseline = facts.read_call_us if facts is not None else None
    rates = io_rates(ctx.obs)
    if baseline is None or baseline <= 0 or rates is None or rates.write_calls is None:
        return None
    calls_per_s = rates.read_calls + rates.write_calls
    if calls_per_s < PER_CALL_MIN_CALLS_PER_S:
        return None
    kernel_cpus = sum(r.kernel_cpus for r in thread_rates(ctx.obs))
    per_call_us = kernel_cpus / calls_per_s * 1e6
    return calls_per_s, per_call_us, per_call_us / baseline, baseline


def _per_call_text(per_call: tuple[float, float, float, float] | None) -> str:
    if per_call is None:
        return ""
    calls, us, ratio, baseline = per_call
    head = f"; the process made {_rate(calls)} read and write calls a second, about {us:.1f} µs of kernel time each"
    if ratio < CHEAP_CALL_RATIO:
        return head + (f", as cheap as a small cached read here ({baseline:.2f} µs, measured): many calls, not costly "
                       "ones")
    if ratio >= COSTLY_CALL_RATIO:
        return head + (f", {ratio:.1f}x what a small cached read costs here ({baseline:.2f} µs, measured): the kernel "
                       "does more on each call")
    return head


def _kernel_controls_text(kernel_controls: tuple[SettingReading, ...], line: str = "") -> str:
    """What the kernel was told to do on the system calls of this process (seccomp filters, forced speculation
    mitigations: /proc/PID/status; the process's own file-system watches that fire per read or write: its fdinfo),
    said beside the kernel time they add to. A watch is said only where its events match what the thread's line
    does (reads: access, open, close after reading; writes: modify, close after writing), or the line is unknown."""
    controls = [r for r in kernel_controls if r.name != "file-system watch" or _watch_matches(r.value, line)]
    if not controls:
        return ""
    shown = ", ".join(f"{r.text()} ({r.effect})" for r in controls[:3])
    return f"; on this process's system calls the kernel also runs: {shown}"


_READ_EVENTS = ("ACCESS", "OPEN", "CLOSE_NOWRITE")
_WRITE_EVENTS = ("MODIFY", "CLOSE_WRITE")
_READS = re.compile(r"\b(p?read\w*|open|load\w*|recv\w*|frombuffer|fromfile|mmap)\b", re.I)
_WRITES = re.compile(r"\b(p?write\w*|save\w*|dump\w*|flush|append)\b", re.I)


def _watch_matches(watch: str, line: str) -> bool:
    events = watch.rsplit(": ", 1)[-1].split("|")
    reads = any(e.split("_", 1)[1] in _READ_EVENTS or e.endswith("_PERM") for e in events if "_" in e)
    writes = any(e.split("_", 1)[1] in _WRITE_EVENTS for e in events if "_" in e)
    if not line or not (_READS.search(line) or _WRITES.search(line)):
        return True
    return (reads and bool(_READS.search(line))) or (writes and bool(_WRITES.search(line)))


def _syscalls_seen(ctx: Context, tid: int) -> str:
    """The blocking system calls /proc's sweeps caught the thread in, most seen first ("write 3 of 9 readings")."""
    readings, seen = blocked_in(ctx.obs, (tid,), states=None)
    top = seen.most_common(3)
    return ", ".join(f"{call} ({n} of {readings} readings)" for call, n in top)


def _hot_line(ctx: Context, tid: int) -> str:
    """The thread's most frequent line of its own code, with its text."""
    return most_common_own_line(ctx, (t for stack in ctx.obs.stacks for t in stack.threads if t.os_thread_id == tid))


# --- the process's timer slack: every sleep and timed wait may end this late ------------------------------------

DEFAULT_TIMERSLACK_NS = 50_000  # the kernel's default (prctl(PR_GET_TIMERSLACK) of a fresh process)
# A slack this long or more is worth a look: a millisecond is twenty times the default, and longer than the short
# sleeps polling loops use.
TIMERSLACK_NS = 1_000_000
# A thread that matters sleeps this share of its samples ...
SLEEP_SHARE = 0.10
# ... and its sleeps last on average no more than this many slacks: the slack, not the time the program asked for,
# is what their length is made of. A warning from SLEEP_COST of the window spent in the slack.
SLACK_DOMINATES = 3.0
SLEEP_COST = 0.10


def _timer_slack(ctx: Context, summary: SchedSummary) -> Iterator[Finding]:
    """The process runs with a long timer slack (prctl(PR_SET_TIMERSLACK), systemd's TimerSlackNSec=, an 'eco'
    profile): the kernel may end every sleep and timed wait of its threads that much late, to batch wake-ups. A
    loop that polls with short sleeps then sleeps the slack every turn. Measured by how long a thread that matters
    sleeps each time: its sleep share (samples at a sleep) over its voluntary context switches a second (/proc)."""
    facts = ctx.obs.os_facts
    slack_ns = facts.timerslack_ns if facts is not None else None
    if slack_ns is None or slack_ns < TIMERSLACK_NS:
        return
    sched = {t.name: t for t in summary.threads if t.python}
    best: tuple[float, str, str, WaitEdge, float, float] | None = None
    for node in ctx.waits.threads:
        sleep = next((e for e in node.waits if e.kind == WAIT_SLEEP), None)
        row = sched.get(node.name)
        if sleep is None or sleep.share < SLEEP_SHARE or row is None or not row.voluntary_per_s:
            continue
        if not speed_matters(ctx, node.name, node.stage):
            continue
        mean_sleep_s = sleep.share * 1.0 / row.voluntary_per_s  # each sleep is one voluntary switch, at least
        in_slack = sleep.share * min(1.0, (slack_ns / 1e9) / mean_sleep_s) if mean_sleep_s > 0 else 0.0
        if best is None or in_slack > best[0]:
            best = (in_slack, node.name, node.stage, sleep, mean_sleep_s, row.voluntary_per_s)
    if best is None:
        return
    in_slack, name, stage, sleep, mean_sleep_s, per_s = best
    dominated = mean_sleep_s <= SLACK_DOMINATES * slack_ns / 1e9
    cost = in_slack if dominated else 0.0
    claim = (f"the process's timer slack is {_ns_text(slack_ns)} (the kernel's default {_ns_text(DEFAULT_TIMERSLACK_NS)}"
             f"): every sleep and timed wait of its threads may end that late; {name} sleeps {pct(sleep.share)} of its "
             f"samples" + (f" at {sleep.site}" if sleep.site else "") + f", about {per_s:.0f} times a second, "
             f"{mean_sleep_s * 1e3:.1f} ms a sleep on average"
             + (": the slack, not the time asked for, makes up its sleeps" if dominated else ""))
    yield Finding(
        rule_id="timer-slack", severity=Severity.WARNING if cost >= SLEEP_COST else Severity.INFO,
        claim=claim,
        evidence=(("timer slack (/proc/PID/timerslack_ns)", f"{slack_ns} ns"),
                  (f"{name} sleeping", f"{pct(sleep.share)} of its samples" + (f" at {sleep.site}" if sleep.site
                                                                                 else "")),
                  (f"{name} voluntary context switches", f"{per_s:.0f} a second")),
        remedy=("Set the slack back (prctl(PR_SET_TIMERSLACK, 0) restores the default; drop TimerSlackNSec= from "
                "the unit, or the 'eco' profile), or wait on an event the other side signals instead of polling "
                "with short sleeps."),
        impact=cost, stages=(stage,) if stage != "other" else ())


def _ns_text(ns: int) -> str:
    return f"{ns / 1e6:g} ms" if ns >= 1_000_000 else f"{ns / 1e3:g} µs"


# --- reads that go to the disk: the page cache does not hold what the process reads ------------------------------

# The process fetched at least this much a second from storage, and this share of what it read through system
# calls: its reads miss the page cache.
STORAGE_BYTES_PER_S = 1 << 20
STORAGE_SHARE = 0.3
# A thread that matters spends this share of its samples at a line that reads (a warning from the second).
READ_LINE_SHARE = 0.10
READ_LINE_WARNING = 0.20
_READ_CALL = re.compile(r"\b(os\.)?(p?read[vx]?|readinto|readinto1|read_bytes|fromfile|preadv)\s*\(")


def _storage_reads(ctx: Context) -> Iterator[Finding]:
    """The process's reads come from the disk, not the page cache (/proc/PID/io: read_bytes against rchar), and a
    thread whose speed is the program's spends its samples at a line that reads: the data is not kept in memory
    (evicted under memory pressure, dropped with posix_fadvise(DONTNEED), read with O_DIRECT, larger than memory,
    or on a cold network or cloud disk)."""
    rate = _storage_rate(ctx)
    if rate is None:
        return
    storage_per_s, share = rate
    if storage_per_s < STORAGE_BYTES_PER_S or share < STORAGE_SHARE:
        return
    best: tuple[float, str, str, str] | None = None
    for stats in ctx.sampled():
        if stats.name.startswith("dflash-diag-") or not speed_matters(ctx, stats.name, stats.stage.value):
            continue
        rows = [thread for thread, _ in ctx.stats_rows(stats)]
        reading = [t for t in rows if (own := own_frame(t)) is not None and _READ_CALL.search(ctx.line_text(own) or "")]
        if not rows or not reading:
            continue
        line_share = len(reading) / len(rows)
        if line_share >= READ_LINE_SHARE and (best is None or line_share > best[0]):
            best = (line_share, stats.name, most_common_own_line(ctx, reading), stats.stage.value)
    if best is None:
        return
    line_share, name, site, stage = best
    # The process's own memory cgroup at its limit is why: the page cache of what it reads is charged to the group.
    limit = memory_limit_binds(ctx.obs)
    why = (f"its cgroup keeps the page cache from holding it: {limit}" if limit else
           "what it reads is not in memory (a first read, or data evicted, dropped with posix_fadvise, read with "
           "O_DIRECT or larger than memory)")
    yield Finding(
        rule_id="storage-reads", severity=Severity.WARNING if line_share >= READ_LINE_WARNING else Severity.INFO,
        claim=(f"the process's reads go to the disk, not the page cache: {bytes_rate(storage_per_s)} fetched from "
               f"storage, {pct(share)} of what it reads; {name} spends {pct(line_share)} of its samples reading at "
               f"{site}: {why}"),
        evidence=(("read from storage (/proc/PID/io read_bytes)", f"{bytes_rate(storage_per_s)}"),
                  ("of all bytes read (rchar)", pct(share)),
                  (f"{name} at a read", f"{pct(line_share)} of its samples, most at {site}"),
                  *((("its memory cgroup", limit),) if limit else ())),
        remedy=(("Raise the group's memory limit above what the process reads again (memory.max, the container's "
                 "--memory, the job's memory request). " if limit else "") +
                "Keep the data in the page cache or in memory: no posix_fadvise(POSIX_FADV_DONTNEED) or O_DIRECT on "
                "data read again, enough free memory for the files (or load them once into RAM), a local copy of "
                "data on a network disk; read larger blocks, in order, ahead of use."),
        impact=line_share if line_share >= READ_LINE_WARNING else 0.0,
        stages=(stage,) if stage != "other" else ())


def _storage_rate(ctx: Context) -> tuple[float, float] | None:
    """(bytes a second fetched from storage, their share of the bytes read) over the window's /proc/PID/io."""
    rates = io_rates(ctx.obs)
    if rates is None or rates.storage_bytes < 0 or rates.read_bytes <= 0:
        return None
    return rates.storage_bytes, min(1.0, rates.storage_bytes / rates.read_bytes)


# --- a thread blocked in the kernel on storage or on the memory map ----------------------------------------------

# The system calls a thread sleeps in while the kernel works for it (not a wait for another thread, a peer or a
# timer: those are the wait-for graph's), and what each waits for.
_KERNEL_WORK = {
    **dict.fromkeys(("fsync", "fdatasync", "sync", "syncfs", "sync_file_range", "msync"),
                    "the storage to confirm writes (a sync per write: os.fsync, a file opened with O_SYNC or "
                    "O_DSYNC, a database's synchronous commits)"),
    **dict.fromkeys(("write", "pwrite64", "writev", "pwritev", "pwritev2", "fallocate", "ftruncate", "io_submit"),
                    "writes to go to storage (the page cache full of dirty pages, O_DIRECT or a sync on the file)"),
    **dict.fromkeys(("openat", "open", "newfstatat", "stat", "lstat", "statx", "unlinkat", "unlink", "renameat",
                     "renameat2", "rename", "mkdirat", "getdents64", "access", "faccessat", "faccessat2"),
                    "file-system metadata (opening, listing or renaming files: a slow or network file system)"),
    **dict.fromkeys(("mmap", "munmap", "mprotect", "madvise", "mremap", "brk", "mlock", "mlockall"),
                    "the process's memory map (mapping and unmapping memory: its threads take turns on one lock)"),
}
# Blocked in the kernel's work in this share of a thread's /proc readings, and at least this many readings.
KERNEL_WAIT_SHARE = 0.20
KERNEL_WAIT_MIN_READINGS = 3


def _computing_share(stats: ThreadStats) -> float:
    """The share of the thread's samples in which it works (Python, native, compile, recompute, the GPU)."""
    return sum(stats.shares.get(state, 0.0) for state in _WORK)


def _most_asleep(ctx: Context, asleep: Callable[[ThreadStats, int], tuple[int, Counter[str], str]]
                 ) -> tuple[float, ThreadStats, int, Counter[str], int, int, str] | None:
    """Of the threads that matter, the one whose /proc readings were in the calls ``asleep`` counts ((its readings,
    those calls, their line)) the largest share, KERNEL_WAIT_MIN_READINGS and KERNEL_WAIT_SHARE at least:
    (share, stats, tid, calls, count, readings, line)."""
    best: tuple[float, ThreadStats, int, Counter[str], int, int, str] | None = None
    for stats in ctx.threads:
        tid = stats.os_thread_id
        if tid is None or not stats.n_samples or not speed_matters(ctx, stats.name, stats.stage.value):
            continue
        readings, calls, line = asleep(stats, tid)
        count = sum(calls.values())
        share = count / readings if readings else 0.0
        if count >= KERNEL_WAIT_MIN_READINGS and share >= KERNEL_WAIT_SHARE and (best is None or share > best[0]):
            best = (share, stats, tid, calls, count, readings, line)
    return best


def _kernel_waits(ctx: Context) -> Iterator[Finding]:
    """A thread that matters asleep in a system call while the kernel works for it (a sync to storage, writes,
    file-system metadata, the memory map) in a share of /proc's readings: its stacks show an ordinary line, the
    readings show what it waits for. Named with the call, its most frequent line, and its cost (the share)."""
    def kernel_work(stats: ThreadStats, tid: int) -> tuple[int, Counter[str], str]:
        readings, seen = blocked_in(ctx.obs, (tid,))
        return readings, Counter({c: n for c, n in seen.items() if c in _KERNEL_WORK}), ""

    best = _most_asleep(ctx, kernel_work)
    if best is None:
        return
    share, stats, tid, calls, count, readings, _ = best
    call = calls.most_common(1)[0][0]
    line = _hot_line(ctx, tid)
    seen_text = ", ".join(f"{c} {n}" for c, n in calls.most_common(3))
    claim = (f"{stats.name} is asleep in the kernel waiting for {_KERNEL_WORK[call]}: /proc caught it blocked in "
             f"`{call}` in {count} of its {readings} readings ({pct(share)})"
             + (f"; its most frequent line: {line}" if line else "") + permission_watches_text(ctx, calls)
             + storage_settings_text(ctx.obs, (tid,)) + _sync_files_text(ctx, line) + _reopened_files_text(ctx))
    stage = stats.stage.value
    yield Finding(
        rule_id="kernel-wait", severity=Severity.WARNING, claim=claim,
        evidence=((f"{stats.name} blocked in (of {readings} /proc readings)", seen_text),
                  ("its most frequent line", line or "?")),
        remedy=("Take the kernel's work off the thread's path: sync once per checkpoint or epoch, not per record "
                "(no O_SYNC/O_DSYNC on a log, no os.fsync per write); write from a thread of its own; keep files on "
                "a local disk; reuse buffers instead of mapping and unmapping memory every step."),
        impact=share, stages=(stage,) if stage != "other" else ())


# --- a thread whose stacks read as native work while /proc sees it asleep -------------------------------------------

_SLEEP_CALLS = frozenset({"nanosleep", "clock_nanosleep"})
# The thread's stacks read as computing this share of its samples at least: the sleeps are inside the C calls they
# show, not a time.sleep of the program's own (which the stacks read as a sleep).
NATIVE_SLEEP_COMPUTING = 0.5
_SLEEP_LINE = re.compile(r"\bsleep\s*\(")


def _native_sleeps(ctx: Context) -> Iterator[Finding]:
    """A thread that matters whose stacks read as native work at a line while /proc caught it asleep in a sleep call
    in a share of its readings: the C code that line calls waits by sleeping (a retry or back-off loop: SQLite's
    busy handler waiting for another connection's lock, a library polling), which no stack sample tells from work.
    Named with the call, the line, what the native frames say of the library, and the share as its cost."""
    def sleeps(stats: ThreadStats, tid: int) -> tuple[int, Counter[str], str]:
        if _computing_share(stats) < NATIVE_SLEEP_COMPUTING:
            return 0, Counter(), ""
        return _sleeps_in_work(ctx, tid)

    best = _most_asleep(ctx, sleeps)
    if best is None:
        return
    share, stats, tid, calls, count, readings, line = best
    call = calls.most_common(1)[0][0]
    sqlite = _in_sqlite(ctx, tid)
    why = ("SQLite sleeps only in its busy handler: another connection holds the database's lock (SQLITE_BUSY, "
           "retried until the busy timeout); a writer that commits often in rollback-journal mode locks its readers "
           "out, where WAL lets them read beside it" if sqlite else
           "the C code it calls waits by sleeping: a retry or back-off loop (a lock another process holds, a "
           "resource polled until it is ready), not work")
    claim = (f"{stats.name} sleeps inside {'SQLite' if sqlite else 'a native call'} where its stacks read as work: "
             f"/proc caught it in `{call}` in {count} of its {readings} readings ({pct(share)})"
             + (f", at {line}" if line else "") + f": {why}")
    stage = stats.stage.value
    yield Finding(
        rule_id="native-sleep", severity=Severity.WARNING, claim=claim,
        evidence=((f"{stats.name} asleep in (of {readings} /proc readings)", f"{call} {count}"),
                  ("its stacks", f"computing {pct(_computing_share(stats))} of its samples"),
                  ("its most frequent line", line or "?")),
        remedy=("Find what the call waits for: with SQLite, put the database in WAL mode (PRAGMA journal_mode=WAL) "
                "so readers are not locked out by a writer's commits, commit less often, or read from a copy; "
                "elsewhere, the lock or resource the library retries on."
                if sqlite else "Find what the library retries on (a lock, a resource it polls) and remove the wait."),
        impact=share, stages=(stage,) if stage != "other" else ())


def _sleeps_in_work(ctx: Context, tid: int) -> tuple[int, Counter[str], str]:
    """(the thread's /proc readings, the sleep calls among them, the line they were at): the readings in a sleep call
    whose nearest stack sample, within MATCH_S (as for a wait that leaves the process), reads as work at a line of the program's own that does not
    sleep (its most frequent such line), kept where that line holds KERNEL_WAIT_MIN_READINGS of them (a C call that
    sleeps, not a library's odd back-off here and there)."""
    samples = [(stack.monotonic_s, (t, state)) for stack, t, _, state in classified(ctx.obs, ctx.threads)
               if t.os_thread_id == tid]  # in time order, each with the state the thread's timeline holds for it
    times = [t_s for t_s, _ in samples]
    readings = 0
    at_line: dict[str, Counter[str]] = {}
    for sweep in ctx.obs.proc:
        for reading in sweep:
            if reading.tid != tid:
                continue
            readings += 1
            if reading.state != "S" or reading.syscall not in _SLEEP_CALLS or not samples:
                continue
            near = samples[nearest_index(times, reading.monotonic_s)]
            thread, state = near[1]
            frame = own_frame(thread)
            if abs(near[0] - reading.monotonic_s) > MATCH_S or frame is None or state not in _WORK:
                continue
            line = line_site(ctx, frame)
            if not _SLEEP_LINE.search(ctx.line_text(frame) or ""):
                at_line.setdefault(line, Counter())[reading.syscall] += 1
    if not at_line:
        return readings, Counter(), ""
    line, most = max(at_line.items(), key=lambda kv: sum(kv[1].values()))
    if sum(most.values()) < KERNEL_WAIT_MIN_READINGS:
        return readings, Counter(), ""  # scattered: no one call that sleeps
    return readings, sum(at_line.values(), Counter()), line


def _in_sqlite(ctx: Context, tid: int) -> bool:
    """The thread's native frames (its stack samples, the native profile) are in sqlite3's module or library."""
    frames = [f for stack in ctx.obs.stacks for t in stack.threads if t.os_thread_id == tid for f in t.frames]
    native = ctx.obs.native
    if native is not None:
        frames += [f for st in native.stacks if st.os_thread_id == tid for f in st.frames]
    return any(f.native and ("sqlite" in f.name.lower() or "sqlite" in f.filename.lower()) for f in frames)


def _reopened_files_text(ctx: Context) -> str:
    """The files the process opens and closes over and over in the window (``sched.reopened_files``): each open
    and close is a path lookup, and a file created and deleted each time (a transaction's journal, a lock file, a
    temporary file per step) costs the file system its metadata work too."""
    text = reopened_text(reopened_files(ctx.obs))
    return f"; {text}" if text else ""


_WRITES_LINE = re.compile(r"\b(write\w*|flush|fsync|fdatasync|dump|save|print)\s*\(")


def _sync_files_text(ctx: Context, line: str) -> str:
    """Files the process holds open for synchronous or direct writes, said where the thread's line writes: each
    such write returns only once the storage has it."""
    facts = ctx.obs.os_facts
    files = facts.sync_files if facts is not None else ()
    if not files or not _WRITES_LINE.search(line):
        return ""
    return (f"; the process holds {', '.join(files[:3])} open for synchronous writes: each write there returns only "
            "once the storage has it")


# --- children forked from a large process -------------------------------------------------------------------------

# A process this large that forks copies page tables worth noticing, and shares that much memory copy-on-write.
FORK_RSS_BYTES = 256 << 20
# A thread that matters faulting this many pages a second in while children are forked: copy-on-write.
FORK_FAULTS_PER_S = 10_000
FORK_KERNEL_CPUS = 0.05  # the forking thread's kernel time, in CPUs over the window
# What one fork's page-table copy costs per GiB resident, measured on the 2-core box (`bench/fork_cost.py`: os.fork
# of a 1 GiB process, 7.9 ms median of 10, of 0.5 GiB 4.4 ms, 10.2 ms with the box loaded; subprocess.run with
# vfork: 0.5 ms whatever the size): the loaded figure, about 20 ms a GiB. Of the forking thread's kernel time,
# only the copies of the forks seen count as their cost, at this rate: the rest, and its page faults, are its own
# work (reading the child's output). The copy-on-write faults land on the other threads that write shared memory.
FORK_COPY_S_PER_GIB = 0.02
# Where a thread starts a child by forking (the stacks' frames: the file and the function).
_FORK_FRAMES = (("subprocess.py", "_execute_child"), ("multiprocessing/popen_fork.py", "_launch"),
                ("os.py", "fork"), ("pty.py", "fork"))


def _fork_cost(ctx: Context, summary: SchedSummary) -> Iterator[Finding]:
    """Children started in the window by forking a large process: each fork copies the process's page tables (the
    forking thread's kernel time), and the memory parent and child then share is copied page by page at the next
    write to it (a thread that matters faulting memory in at a high rate). Named with the children, who forks them
    and where, and the cost: the kernel time of the threads that matter, over the window."""
    rss = max((r.rss_bytes or 0 for r in ctx.obs.resources), default=0)
    if summary.children_started < 1 or rss < FORK_RSS_BYTES:
        return
    by_tid = {t.os_thread_id: t for t in ctx.threads if t.os_thread_id is not None}
    faulting: list[tuple[str, float, float]] = []  # (name, faults a second, kernel CPUs)
    kernel_by_tid: dict[int, float] = {}
    for r in thread_rates(ctx.obs):
        if r.tid not in by_tid:
            continue
        kernel_by_tid[r.tid] = r.kernel_cpus
        stats = by_tid[r.tid]
        if r.minor_per_s >= FORK_FAULTS_PER_S and speed_matters(ctx, stats.name, stats.stage.value):
            faulting.append((stats.name, r.minor_per_s, r.kernel_cpus))
    forker, site = _forking_thread(ctx)
    forker_stats = next((t for t in ctx.threads if t.name == forker), None)
    forker_kernel = kernel_by_tid.get(forker_stats.os_thread_id, 0.0) \
        if forker_stats is not None and forker_stats.os_thread_id is not None else 0.0
    # The forks themselves must show: the forking thread's kernel time copying page tables (a pool started once an
    # epoch costs a few milliseconds; a child per batch from a large process, a tenth of a CPU).
    if forker_kernel < FORK_KERNEL_CPUS:
        return
    forker_matters = forker_stats is not None and speed_matters(ctx, forker, forker_stats.stage.value)
    # The faulting threads' kernel time is what the shared pages cost them (up to: their own allocations fault too);
    # the forker's own faults are its work, its kernel time the page tables it copied (at most).
    faulting = [f for f in faulting if f[0] != forker]
    copy_cpus = summary.children_started / max(summary.window_s, 1e-9) * rss / 2**30 * FORK_COPY_S_PER_GIB
    cost = sum(k for _, _, k in faulting) + (min(forker_kernel, copy_cpus) if forker_matters else 0.0)
    warn = cost >= WARNING_COST
    if not faulting and not forker_matters:
        return
    comms = sorted({c.comm for s in ctx.obs.sched for c in s.children})
    started = summary.children_started
    claim = (f"the process forks while it holds {rss / 2**30:.1f} GiB: {started} "
             f"{'child' if started == 1 else 'children'} started in {summary.window_s:.0f} s "
             f"({', '.join(comms[:3]) or '?'})"
             + (f", by {forker} at {site} ({forker_kernel:.2f} CPUs in the kernel)" if forker else "")
             + "; each fork copies the whole process's page tables, and the memory parent and child share is "
               "copied at the next write to each page"
             + "".join(f"; {name} faults {_rate(faults)} pages a second in ({kernel:.2f} CPUs in the kernel)"
                       for name, faults, kernel in faulting[:2]))
    stages = tuple(sorted({by_tid[t].stage.value for t in by_tid if by_tid[t].name in {n for n, _, _ in faulting}
                           or (forker_matters and by_tid[t].name == forker)} - {"other"}))
    yield Finding(
        rule_id="fork-cost", severity=Severity.WARNING if warn else Severity.INFO, claim=claim,
        evidence=(("children started", f"{summary.children_started} in {summary.window_s:.1f} s"),
                  ("page tables copied, at this box's measured cost", f"{copy_cpus:.3f} CPUs over the window "
                   f"({FORK_COPY_S_PER_GIB * 1e3:.0f} ms a fork per GiB resident)"),
                  ("the process's resident memory", f"{rss / 2**20:.0f} MiB"),
                  ("threads that matter faulting memory in", ", ".join(f"{n} {_rate(f)}/s" for n, f, _ in faulting)
                   or "none"),
                  ("forked by", f"{forker} at {site}" if forker else "?")),
        remedy=("Start children without copying the process: subprocess uses vfork or posix_spawn unless a setting "
                "turns them off (subprocess._USE_VFORK, _USE_POSIX_SPAWN), multiprocessing can use 'forkserver'; or "
                "start one long-lived helper before the large data is loaded, or do the work in-process."),
        impact=cost if warn else 0.0, stages=stages)


def _forking_thread(ctx: Context) -> tuple[str, str]:
    """The thread whose samples are most often inside a fork (subprocess's child start, multiprocessing's fork), and
    its own line there; ("", "") when none was caught."""
    counts: dict[str, list[ThreadSample]] = {}
    for stack in ctx.obs.stacks:
        for t in stack.threads:
            if any(not f.native and f.filename.endswith(path) and f.name.endswith(name) for f in t.frames
                   for path, name in _FORK_FRAMES):
                counts.setdefault(t.name or "?", []).append(t)
    if not counts:
        return "", ""
    name = max(counts, key=lambda n: len(counts[n]))
    return name, most_common_own_line(ctx, counts[name])
