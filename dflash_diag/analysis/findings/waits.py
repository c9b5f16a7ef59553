"""What the wait-for graph (``analysis.waits``) says: a deadlock, a stalled process, and the limiting path when
it runs past what the two-stage verdict can see.

- ``deadlock`` (critical): threads that wait for each other's locks in a cycle, or threads parked on a lock for
  the whole window while nothing in the process moves (no thread computes, no stack moves, next to no CPU).
- ``stalled`` (critical): nothing moves and every thread waits on something only another thread of the process
  can end (a condition, an event, a join, a queue): the run makes no progress at all. Waits on a socket, a
  pipe, a child process or a sleep can end from outside: a slow source, not a stall we can claim.
- ``wait-chain`` (a symptom): the threads that train wait, and following what they wait on leads past the pipeline
  stages (to a loader two queues upstream, a side thread holding the GIL or a lock, a child process). The claim is
  the path, root last: ``trainer waits on `batches` (get) 80% <- loader spends decode_jpeg (data.py:33) 91%``.
  A warning when the training threads lose at least half their time on the first wait (a measured cost).
- ``process-wait`` (a cause): a thread whose speed is the program's (it trains, or its stage limits throughput)
  spends a share of its samples blocked on another process (a file lock it holds, a pipe it feeds or drains), named
  with what that process does: a wait the chain does not follow when the thread still computes more than it waits.
"""

from __future__ import annotations

from collections.abc import Iterator

from dflash_diag.analysis.findings._context import (
    Context,
    bytes_rate,
    known_mechanisms_text,
    libc_text,
    pct,
    settings_text,
    speed_matters,
    threads_text,
)
from dflash_diag.analysis.findings._registry import RuleSpec
from dflash_diag.analysis.findings.gil import native_gil_text, native_gil_wait
from dflash_diag.analysis.findings.hang import hung_on_queue
from dflash_diag.analysis.hotspots import library_place
from dflash_diag.analysis.native import native_text
from dflash_diag.analysis.peers import only_computes
from dflash_diag.analysis.sched import (
    blocked_in,
    reopened_files,
    reopened_text,
    storage_settings_text,
    summary_of,
    thread_rates,
    write_rate,
)
from dflash_diag.analysis.waits import STARTING_UP, children_text
from dflash_diag.model import PIPELINE_STAGES, Finding, Severity, Stage
from dflash_diag.model.findings import CAUSE, SYMPTOM
from dflash_diag.model.sched import SchedSummary
from dflash_diag.model.waits import (
    WAIT_CHILD,
    WAIT_CONDITION,
    WAIT_GPU,
    WAIT_IO,
    WAIT_JOIN,
    WAIT_LOCK,
    WAIT_PROCESS,
    WAIT_QUEUE_GET,
    WAIT_QUEUE_PUT,
    WAIT_SLEEP,
    ThreadWaits,
    WaitGraph,
    edge_text,
)

MIN_SAMPLES = 5
MIN_WINDOW_S = 2.0
# A lock (or a condition) waited on in this share of a thread's samples is where it has been all window.
PARKED_SHARE = 0.9
# Waits only another thread of this process can end: when every thread is parked in one of them, nothing will.
_INTERNAL = frozenset({WAIT_LOCK, WAIT_CONDITION, WAIT_JOIN, WAIT_QUEUE_GET, WAIT_QUEUE_PUT})
# Waits a wait-chain may end in: outside the process or the stages (not the GPU: the GPU rules judge that, nor a
# sleep: by design).
CHAIN_LEAF_SHARE = 0.5
SLOW_SHARE = 0.5  # the training threads lose half their time on the first wait: a warning
_DEADLOCK_REMEDY = (
    "Take the locks in one global order everywhere (or hold one at a time); a lock held while waiting on a "
    "condition, a queue or another lock is the usual cause. `py-spy dump --pid PID` shows the same stacks; add "
    "timeouts to acquire() so a cycle raises instead of hanging."
)

_PROCESS_FIX = ("hold a shared file lock only for the write itself (not while compressing or uploading), or take it "
                "without blocking and retry later; feed a pipe faster (more producer processes, a cheaper format) or "
                "read it on a thread of its own with a buffer.")
_PROCESS_REMEDY = "Make the other process release it sooner, or stop waiting for it in the training loop: " + _PROCESS_FIX

RULES = (
    RuleSpec("deadlock", sampled=True, slows=False, halts=True),
    RuleSpec("stalled", kind=SYMPTOM, sampled=True, hang=True, halts=True),
    RuleSpec("wait-chain", kind=SYMPTOM, sampled=True,
             supersedes=("pipeline-bottleneck-drafter", "pipeline-bottleneck-target")),
    RuleSpec("where-time-goes", kind=SYMPTOM, sampled=True, unlinked=True),
    RuleSpec("process-wait", sampled=True),
)
# A thread that matters losing this share of its samples to another process: its cost (a warning); from
# PROCESS_NOTE_SHARE, said as information.
PROCESS_WAIT_SHARE = 0.25
PROCESS_NOTE_SHARE = 0.10


def check(ctx: Context) -> Iterator[Finding]:
    obs = ctx.obs
    if len(obs.stacks) < MIN_SAMPLES or not obs.process_alive:
        return
    graph = ctx.waits
    # "Nothing moved" is a claim about CPU time too: without /proc readings (a recording, an unreadable /proc) a
    # consumer whose 2 ms steps land in no sample looks stopped. Only a lock cycle is claimed without them.
    stopped = obs.window_s >= MIN_WINDOW_S and not graph.progress and graph.process_cpu_pct is not None
    deadlock = _deadlock(ctx, graph, stopped)
    stall = _stalled(ctx, graph) if stopped and deadlock is None else None
    if deadlock is not None:
        yield deadlock
    elif stall is not None:
        yield stall
    elif stopped and not _queue_hang(ctx):
        chain = _stopped_chain(ctx, graph)
        if chain is not None:
            yield chain
    if deadlock is None and not stopped:
        chain = _chain(ctx, graph)
        if chain is not None:
            yield chain
        elif graph.chain:
            yield _where_time_goes(ctx, graph)
        yield from _process_waits(ctx, graph, chain)


def _process_waits(ctx: Context, graph: WaitGraph, chain: Finding | None) -> Iterator[Finding]:
    """Each thread that matters and waits on another process, unless the wait chain already ends there."""
    followed = {e.target for hop in graph.chain if (e := hop.edge) is not None and e.kind == WAIT_PROCESS} \
        if chain is not None else set()
    for n in graph.threads:
        edge = next((e for e in n.waits if e.kind == WAIT_PROCESS and e.target not in followed), None)
        if edge is None or edge.share < PROCESS_NOTE_SHARE or not speed_matters(ctx, n.name, n.stage):
            continue
        # A thread that does not train costs throughput by its waits only where the training threads wait for
        # what it feeds them: a loader blocked on a server that works, while the trainer computes, costs nothing.
        costly = edge.share >= PROCESS_WAIT_SHARE and (n.name in graph.trains or _trainers_starve(graph))
        # Where the other process only computes, the wait is a stage of the pipeline that lives there: it still
        # costs what it costs (the stage verdict names it as the reason), but nothing about it is the matter.
        warn = costly and not _stage_elsewhere(ctx, n.name)
        where = f" at {edge.site}" if edge.site else ""
        yield Finding(
            rule_id="process-wait", severity=Severity.WARNING if warn else Severity.INFO,
            claim=f"{n.name} spends {pct(edge.share)} of its samples blocked{where} on {edge.target}",
            evidence=((n.name, f"blocked on another process {pct(edge.share)} of its samples, computing "
                               f"{pct(n.computing_share)}"),
                      ("seen by", "/proc (the thread's blocking call, /proc/locks or the pipe's other end) at the "
                                  "same line as its off-CPU stack samples")),
            remedy=_PROCESS_REMEDY, impact=edge.share if costly else 0.0,
            stages=tuple(sorted({Stage.of(n.stage)} - {Stage.OTHER})))


def _stage_elsewhere(ctx: Context, name: str) -> bool:
    """The thread waits on a process that only computes (``peers.only_computes``): information, as a stage with no
    cause found is; the claim still names the process and where its time goes."""
    tid = next((t.os_thread_id for t in ctx.threads if t.name == name and t.os_thread_id is not None), None)
    return tid is not None and only_computes(ctx.obs, tid)


# The training threads wait for their input this share of their samples, at least: what feeds them limits them.
STARVED_SHARE = 0.10


def _trainers_starve(graph: WaitGraph) -> bool:
    """The threads that train wait on a queue, a condition or a join for their input (or no thread trains)."""
    if not graph.trains:
        return True
    return any(e.kind in (WAIT_QUEUE_GET, WAIT_CONDITION, WAIT_JOIN) and e.share >= STARVED_SHARE
               for n in graph.threads if n.name in graph.trains for e in n.waits)


def _parked(n: ThreadWaits, kinds: frozenset[str]) -> bool:
    return bool(n.waits) and n.waits[0].kind in kinds and n.waits[0].share >= PARKED_SHARE


def _deadlock(ctx: Context, graph: WaitGraph, stopped: bool) -> Finding | None:
    by_name = {n.name: n for n in graph.threads}
    cycle = [by_name[name] for name in graph.cycle if name in by_name]
    if cycle and all(n.computing_share < 0.1 and not n.stack_changed for n in cycle):
        involved = cycle
        claim = (f"{threads_text([n.name for n in cycle])} are deadlocked, each waiting for a lock another holds: "
                 + "; ".join(_lock_text(n) for n in cycle))
    else:
        involved = [n for n in graph.threads if _parked(n, frozenset({WAIT_LOCK}))]
        if not stopped or not involved:
            return None
        claim = (f"{threads_text([n.name for n in involved])} {'is' if len(involved) == 1 else 'are'} deadlocked: nothing in the process moved for the "
                 f"{ctx.obs.window_s:.1f} s window and they waited on a lock all of it: "
                 + "; ".join(_lock_text(n, graph) for n in involved))
    evidence = [(n.name, _lock_text(n, graph)) for n in involved]
    evidence += _progress_evidence(ctx, graph)
    return Finding(rule_id="deadlock", severity=Severity.CRITICAL, claim=claim, evidence=tuple(evidence),
                   remedy=_DEADLOCK_REMEDY, impact=1.0, kind=CAUSE)


def _lock_text(n: ThreadWaits, graph: WaitGraph | None = None) -> str:
    """``A waits for lock `L` 100% at f.py:9 (g), held by B[, which waits on a Condition 100% at ...]``."""
    edge = n.waits[0]
    holder = f", held by {threads_text(list(edge.to_threads))}" if edge.to_threads else ""
    held = f" while holding `{'`, `'.join(n.holds)}`" if n.holds else ""
    by_name = {t.name: t for t in graph.threads} if graph is not None else {}
    for name in edge.to_threads[:2]:
        other = by_name.get(name)
        if other is not None and other.waits and other.waits[0].kind != WAIT_LOCK:
            holder += f" (which {edge_text(other.waits[0])})"
    return f"{n.name} {edge_text(edge)}{holder}{held}"


def _stalled(ctx: Context, graph: WaitGraph) -> Finding | None:
    threads = list(graph.threads)
    if not threads or not all(_parked(n, _INTERNAL) for n in threads):
        return None
    if all(n.waits[0].kind in (WAIT_QUEUE_GET, WAIT_QUEUE_PUT) for n in threads):
        return None  # queue-only: the hang rule says it, with the threads that died
    waits = "; ".join(f"{n.name} {edge_text(n.waits[0])}" for n in threads[:4])
    evidence = [(n.name, edge_text(n.waits[0])) for n in threads] + _progress_evidence(ctx, graph)
    return Finding(
        rule_id="stalled", severity=Severity.CRITICAL,
        claim=f"the process is stalled: no thread made progress in the {ctx.obs.window_s:.1f} s window, every "
              f"thread waits on another: {waits}",
        evidence=tuple(evidence),
        remedy="Find which thread should have ended these waits (signalled the condition, set the event, fed the "
               "queue, finished before the join): it died, or waits itself. Give every wait a timeout that raises, so "
               "a lost wake-up fails loudly instead of hanging the run.",
        impact=1.0, kind=SYMPTOM)


def _progress_evidence(ctx: Context, graph: WaitGraph) -> list[tuple[str, str]]:
    out = [("threads computing", "none"), ("stacks that moved", "none")]
    if graph.process_cpu_pct is not None:
        out.append(("process CPU over the window", f"{graph.process_cpu_pct:.1f}% of one core"))
    return out


def _chain(ctx: Context, graph: WaitGraph) -> Finding | None:
    chain = graph.chain
    if not chain or chain[0].edge is None:
        return None
    first = chain[0].edge
    root = chain[-1]
    if root.edge is not None and root.edge.kind in (WAIT_GPU, WAIT_SLEEP):
        return None
    if len(chain) == 1 and (first.kind not in (WAIT_CHILD, WAIT_IO, WAIT_LOCK, WAIT_CONDITION, WAIT_JOIN, WAIT_PROCESS)
                            or first.share < CHAIN_LEAF_SHARE):
        return None
    if not _beyond_stages(ctx, graph):
        return None
    severity = Severity.WARNING if first.share >= SLOW_SHARE else Severity.INFO
    start = chain[0]
    verb = "loses" if len(start.threads) == 1 else "lose"
    claim = f"{threads_text(list(start.threads))} {verb} {pct(first.share)} of its time waiting: {graph.chain_text()}"
    if len(start.threads) > 1:
        claim = claim.replace(" of its time", " of their time", 1)
    evidence: list[tuple[str, str]] = [("path (root last)", graph.chain_text())]
    for hop in chain:
        label = ", ".join(hop.threads[:3])
        evidence.append((label, edge_text(hop.edge) if hop.edge is not None else f"computes: {hop.hot or '?'}"))
    return Finding(rule_id="wait-chain", severity=severity, claim=claim, evidence=tuple(evidence),
                   remedy=_chain_remedy(graph), impact=first.share, kind=SYMPTOM,
                   # Where throughput is lost: a cause that slows those threads (the GIL hog) explains the path.
                   stages=tuple(sorted({_stage_of(graph, t) for t in start.threads})))


def _queue_hang(ctx: Context) -> bool:
    """The hang rule's case (threads parked on a queue whose other side is gone): it says it, with the deaths."""
    return hung_on_queue(ctx)


def _stopped_chain(ctx: Context, graph: WaitGraph) -> Finding | None:
    """Nothing moved, and the threads that should train wait on something outside (a pipe, a socket, a child):
    the path says where the run is stuck. Critical: the window saw no progress at all."""
    chain = graph.chain
    if not chain or chain[0].edge is None or chain[-1].edge is None:
        return None
    if chain[-1].edge.kind in (WAIT_GPU, WAIT_SLEEP) or chain[0].edge.share < PARKED_SHARE:
        return None
    waiting = [n for n in graph.threads if n.name not in {t for hop in chain for t in hop.threads}]
    others = "; ".join(f"{n.name} {edge_text(n.waits[0])}" for n in waiting[:3] if n.waits)
    claim = (f"the run does not move: nothing in the process progressed in the {ctx.obs.window_s:.1f} s window, "
             f"and {graph.chain_text()}" + (f" (meanwhile {others})" if others else ""))
    evidence = [("path (root last)", graph.chain_text())] + _progress_evidence(ctx, graph)
    return Finding(rule_id="wait-chain", severity=Severity.CRITICAL, claim=claim, evidence=tuple(evidence),
                   remedy=_chain_remedy(graph), impact=1.0, kind=SYMPTOM,
                   stages=tuple(sorted({_stage_of(graph, t) for t in chain[0].threads})))


def _where_time_goes(ctx: Context, graph: WaitGraph) -> Finding:
    """The root of the graph as information: what the main path does, for when no rule names anything (it leads
    only when nothing else does, and no cause is linked to it), with how the OS ran its threads."""
    split = _os_split(ctx, graph)
    below = _root_native(ctx, graph)
    elsewhere = _root_process_waits(ctx, graph)
    return Finding(
        rule_id="where-time-goes", severity=Severity.INFO, kind=SYMPTOM, impact=0.0, stages=_root_stages(graph),
        # it states the path, not what other rules found: it stands beside a health finding (a correctness verdict)
        # or a cause of a stage verdict in the same report, and leads only when nothing else does
        claim=f"where the time goes: {graph.chain_text()}" + (f"; {below}" if below else "")
              + (f"; {elsewhere}" if elsewhere else "") + (f"; {split}" if split else ""),
        evidence=(("path (root last)", graph.chain_text()),) + ((("below its Python (py-spy --native, environ)", below),)
                                                               if below else ())
                 + ((("waits on another process", elsewhere),) if elsewhere else ())
                 + ((("the OS's view (/proc)", split),) if split else ()),
        remedy="If this is slower than expected, the root's functions above are where to look: `dflash-diag top PID` "
               "shows them live, `dflash-diag record PID` as a timeline.")


def _root_stages(graph: WaitGraph) -> tuple[str, ...]:
    """The pipeline stages of the root's threads: a cause that declares it explains where the time goes links to it
    only on one of them (``RuleSpec.explains``)."""
    root = graph.root
    return tuple(sorted({n.stage for n in graph.threads if root is not None and n.name in root.threads}
                        & set(PIPELINE_STAGES)))


def _root_process_waits(ctx: Context, graph: WaitGraph) -> str:
    """The root's threads' waits on another process (a pipe it drains, a file lock, a child process it feeds through
    a queue or waits on), where they take PROCESS_NOTE_SHARE of a thread's samples or more: the path's time at that
    line is that process's, and what ``process-wait`` (or the children's samples) say of it belongs in the path's
    own account, or ""."""
    root = graph.root
    if root is None:
        return ""
    said = []
    for n in graph.threads:
        if n.name not in root.threads:
            continue
        for e in n.waits:
            if e.kind == WAIT_PROCESS and e.share >= PROCESS_NOTE_SHARE:
                where = f" at {e.site}" if e.site else ""
                said.append(f"{n.name} blocked {pct(e.share)} of its samples{where} on {e.target}")
            elif e.kind == WAIT_CHILD and e.share >= PROCESS_NOTE_SHARE:
                children = children_text(ctx)
                said.append(f"{n.name} {edge_text(e)}" + (f" <- {children}" if children else ""))
    return "; ".join(said[:2])


def _root_native(ctx: Context, graph: WaitGraph) -> str:
    """Where the root's threads spend their time below their Python frames (the native profile), with the settings
    from the environment that the installed code they run reads, or ""."""
    root = graph.root
    if root is None:
        return ""
    rows = [row for stats in ctx.threads if stats.name in root.threads for row in ctx.stats_rows(stats)]
    # the library function the root's own hot line spends in (Python frames: no native profile needed)
    inside = library_place(rows)
    tids = {t.os_thread_id for t, _ in rows if t.os_thread_id is not None}
    settings = known_mechanisms_text(ctx, rows, tids) + settings_text(ctx, rows)
    if ctx.obs.native is None and not settings:
        return f"most of its time {inside}" if inside else ""
    native = native_text(ctx.obs.native, tids)
    libc = libc_text(ctx, tids)
    said = (f"; most of its time {inside}" if inside else "") + (f"; {native}" if native else "") \
        + (f"; {libc}" if libc else "") + settings
    gil = native_gil_wait(ctx, [t for t in ctx.sampled() if t.name in root.threads])
    if gil is not None:
        said += "; " + native_gil_text(ctx, *gil)
    return said.lstrip("; ")


def _os_split(ctx: Context, graph: WaitGraph) -> str:
    """How the OS ran the root's threads over the window, on average: on a CPU (and the kernel's part of it),
    runnable but waiting for one, off a CPU (blocked or asleep). "" without the scheduler's readings."""
    root = graph.root
    summary = summary_of(ctx.obs)
    if root is None or not isinstance(summary, SchedSummary):
        return ""
    rows = [t for t in summary.threads if t.name in root.threads]
    if not rows:
        return ""
    cpu = sum(t.cpu_share for t in rows) / len(rows)
    runq = sum(t.runq_share for t in rows) / len(rows)
    kernel = _kernel_part(ctx, {t.tid for t in rows})
    off = max(0.0, 1.0 - cpu - runq)
    who = "its thread" if len(rows) == 1 else f"its {len(rows)} threads, on average,"
    on = f"on a CPU {pct(cpu)} of the window" + (f" ({pct(kernel)} of that in the kernel)" if kernel is not None
                                                   else "")
    blocked = _blocked_in(ctx, {t.tid for t in rows}) if off >= OFF_CPU_SAID else ""
    writes = write_rate(ctx.obs)
    output = (f"; the process made {writes[0]:,.0f} write calls a second ({bytes_rate(writes[1])})"
              if writes is not None and writes[0] >= WRITES_PER_S_SAID else "")
    reopened = reopened_text(reopened_files(ctx.obs))
    output += f"; {reopened}" if reopened else ""
    return (f"{who} {on}, waiting for a CPU {pct(runq)}, off a CPU {pct(off)}" + (f" ({blocked})" if blocked else "")
            + output)


# The process's write calls said with where its time goes from this rate (a log line per op, an unbuffered stream):
# a trainer that prints a progress line now and then makes a few a second.
WRITES_PER_S_SAID = 1000.0


# Off a CPU this share of the window or more, the root's threads are said with what the kernel had them blocked in.
OFF_CPU_SAID = 0.2


def _blocked_in(ctx: Context, tids: set[int]) -> str:
    """What /proc's sweeps caught these threads blocked in while asleep (the system call, else the kernel's wait
    channel), most seen first: "blocked in futex 6, fsync 3 of 10 readings"; "" when nothing was caught."""
    readings, seen = blocked_in(ctx.obs, tids, wchan=True)
    top = seen.most_common(3)
    if not top:
        return ""
    return ("blocked in " + ", ".join(f"{call} {n}" for call, n in top) + f" of {readings} readings"
            + storage_settings_text(ctx.obs, tids))


def _kernel_part(ctx: Context, tids: set[int]) -> float | None:
    """The kernel's part of these threads' CPU time over the window (their task stat's stime against utime)."""
    rates = [r for r in thread_rates(ctx.obs) if r.tid in tids]
    total = sum(r.cpu for r in rates)
    return sum(r.kernel_cpus for r in rates) / total if total > 0 else None


def _stage_of(graph: WaitGraph, name: str) -> str:
    return next((Stage.of(n.stage) for n in graph.threads if n.name == name), Stage.OTHER)


def _beyond_stages(ctx: Context, graph: WaitGraph) -> bool:
    """The chain says more than the two-stage verdict: it starts or ends outside the stages, or is longer than
    consumer <- producer."""
    chain = graph.chain
    start_stages = {_stage_of(graph, t) for t in chain[0].threads}
    root_stages = {_stage_of(graph, t) for t in chain[-1].threads}
    if len(chain) >= 3:
        return True
    if len(chain) == 2 and start_stages == {Stage.DRAFTER} and root_stages == {Stage.TARGET}:
        return False
    if len(chain) == 1 and start_stages <= set(PIPELINE_STAGES) and chain[0].edge is not None \
            and chain[0].edge.kind == WAIT_IO:
        return False  # a stage waiting on a socket: the stage verdict says where
    return True


def _chain_remedy(graph: WaitGraph) -> str:
    root = graph.chain[-1]
    who = ", ".join(root.threads[:3])
    if root.edge is None and root.hot.startswith(STARTING_UP):
        return (f"Start {who} once and keep them (one pool for the run, persistent workers), or make their start "
                "cheap: the 'fork' or 'forkserver' start method with the heavy imports preloaded, and the main "
                "module's heavy imports and set-up under `if __name__ == '__main__':`.")
    if root.edge is None:
        return (f"Speed up {who} where it spends its time ({root.hot or 'its hottest functions'}), or run more of "
                "it in parallel (more threads or worker processes, or move it out of the GIL: a C/vectorised path); "
                "the threads upstream in the path only wait for it.")
    kind = root.edge.kind
    if kind == WAIT_CHILD:
        return (f"{who} waits on a child process: speed up the child's work, run more workers, or overlap the "
                "request with training (submit the next one before waiting on this one).")
    if kind == WAIT_IO:
        return f"{who} waits on I/O: prefetch, read in parallel, or use a faster source."
    if kind == WAIT_PROCESS:
        return f"{who} waits on another process (named above, with what it does): " + _PROCESS_FIX
    return (f"{who} waits at {root.edge.site or 'the line above'}: find what should end that wait and why it is "
            "slow; give the wait a timeout so a stuck peer is noticed.")
