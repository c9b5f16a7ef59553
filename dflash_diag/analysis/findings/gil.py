"""GIL contention: who holds the GIL, who waits for it, and how much.

A GIL wait is a thread that has Python work to do and cannot run it: over a window such a thread still gets
the GIL between waits, so it uses CPU. A thread that sits in a C-level wait (``SimpleQueue.get``, a socket
read, ``select``, a lock) for the whole window is *waiting*, not contending: its /proc CPU time is ~0, and it
is never counted as a GIL waiter, whatever a single stack sample suggests.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from dflash_contract.board import GilKeys, ProbeName
from dflash_diag.analysis.findings._context import (
    Context,
    libc_text,
    lower_bound,
    num,
    pct,
    settings_text,
    sub,
    threads_text,
)
from dflash_diag.analysis.findings._registry import RuleSpec
from dflash_diag.analysis.hotspots import hot_functions, work_library_text
from dflash_diag.analysis.native import MIN_SAMPLES, GilWaits, gil_waits, holder_native_text, thread_stacks
from dflash_diag.analysis.waits import POOL_FUTURES, is_pool_worker
from dflash_diag.model import PIPELINE_STAGES, Finding, Severity, Stage, ThreadState, ThreadStats
from dflash_diag.model.common import is_na
from dflash_diag.model.waits import WAIT_CONDITION, WAIT_QUEUE_GET

# With N busy Python threads some waiting is normal; when the process as a whole spends a third of the
# window with a thread waiting for the GIL, Python (not the GPU) paces the pipeline.
CONTENTION_WARNING_SHARE = 0.33
# Sampled: a thread that waits for the GIL in a fifth of its samples (at one-sigma confidence) loses a fifth
# of its throughput.
THREAD_WAIT_SHARE = 0.20
# A thread below this share of one core over the window did not run Python at all: it waits in C, not for
# the GIL (a contending thread runs between its waits).
WAITING_THREAD_CPU_PCT = 1.0
SHOWN = 3
# A side thread holding the GIL in this share of the samples (lower bound) starves the stages' Python threads.
MONOPOLY_SHARE = 0.5
# ... or a side thread running Python in most samples while using this share of one core (/proc).
MONOPOLY_CPU_PCT = 50.0
# A stage thread wants the GIL when this share of its samples runs Python or waits for the GIL.
WANTS_PYTHON_SHARE = 0.2
# A GIL holder that spends this share of its samples compiling holds the GIL because it compiles.
HOG_COMPILING_SHARE = 0.2

# A thread whose samples (nearly) all compute, yet which /proc shows asleep (neither on a CPU nor waiting for one)
# this share of the window, waits where its stacks cannot show it: a Python thread between two ops waits for
# the GIL there (py-spy reads it as the op it is about to run).
HIDDEN_SLEEP_PCT = 15.0
HIDDEN_WORK_SHARE = 0.8
# A thread whose speed is the program's, waiting for the GIL in this share of its native samples (lower bound): said
# as information, with who holds it.
NATIVE_WAIT_SHARE = 0.2
# ... and the GIL it waits for is named when a thread off the training path holds it in this share of the dumps
# (lower bound).
SIDE_HOLDER_SHARE = 0.25
_WORK = (ThreadState.PYTHON, ThreadState.NATIVE, ThreadState.COMPILE, ThreadState.CHECKPOINT)

# The probe's own thread (probes/gil.py names it so).
KNOCKER_THREAD = "dflash-diag-gil-knocker"

RULES = (RuleSpec("gil-contention", sampled=True),)


@dataclass(frozen=True, slots=True)
class ProbeWait:
    """The probe's GIL wait, with what a busy machine added to it taken out."""

    share: float  # of the window, a thread that wants the GIL waits for it
    runq_share: float  # taken out: the knocker, and the GIL's holders, waiting for a CPU


def probe_wait(payload: Mapping[str, object] | None,
               earlier: Mapping[str, object] | None = None) -> ProbeWait | None:
    """The probe's contention as GIL contention: the knocker is late both when it waits for the GIL and when it waits
    for a CPU (an oversubscribed machine); only the first is. And a thread holds the GIL either on a CPU or off one:
    where the knocker waits longer than the other threads ran, the rest was a holder preempted with the GIL in hand,
    waiting for a CPU (another process's load, not this process's Python), as far as their run-queue time covers it.

    With an ``earlier`` board of the same probe carrying running totals, all of it is judged over the interval
    between the two (the observation's window): the probe's own 10 s window of a young process holds its start-up,
    which the per-thread shares since the last publish do not cover."""
    seen = _interval(earlier, payload) or _window(payload)
    if seen is None:
        return None
    contention, knocker_runq, others = seen
    wait = max(0.0, contention - knocker_runq)
    holders_runq = 0.0
    if others and all(c is not None and r is not None for c, r in others):
        on_cpu = min(1.0, sum(c or 0.0 for c, _ in others))
        holders_runq = min(max(0.0, wait - on_cpu), sum(r or 0.0 for _, r in others))
    return ProbeWait(share=wait - holders_runq, runq_share=knocker_runq + holders_runq)


# (contention, the knocker's run-queue share, (CPU share, run-queue share) of each other thread)
_Seen = tuple[float, float, list[tuple[float | None, float | None]]]
# Two boards closer than this, or with fewer knocks between them, say too little: the window's rates are used.
MIN_INTERVAL_S = 1.0
MIN_KNOCKS = 50


def _window(payload: Mapping[str, object] | None) -> _Seen | None:
    """The probe's readings over its own window (the knocker's) and since its previous publish (the threads')."""
    contention = num(payload, GilKeys.CONTENTION_SHARE)
    if contention is None:
        return None
    others = [(num(v, GilKeys.CPU_SHARE), num(v, GilKeys.RUNQ_SHARE)) for n, v in sub(payload, GilKeys.THREADS).items()
              if isinstance(v, Mapping) and str(n) != KNOCKER_THREAD]
    return contention, num(payload, GilKeys.KNOCKER_RUNQ_SHARE) or 0.0, others


def _interval(earlier: Mapping[str, object] | None, payload: Mapping[str, object] | None) -> _Seen | None:
    """The readings over the interval between two boards, from the probe's running totals; None where either lacks
    them, or the interval is too short or not one process's (totals that went back)."""
    keys = (GilKeys.CLOCK_S, GilKeys.KNOCKS_TOTAL, GilKeys.LATE_TOTAL_S)
    then, now = [num(earlier, k) for k in keys], [num(payload, k) for k in keys]
    if None in then or None in now:
        return None
    dt_s, knocks, late_s = (b - a for a, b in zip(then, now, strict=True))  # type: ignore[operator]
    if dt_s < MIN_INTERVAL_S or knocks < MIN_KNOCKS or late_s < 0:
        return None
    slack_s = (num(payload, GilKeys.TIMER_SLACK_MS) or 0.0) / 1e3
    contention = min(1.0, max(0.0, late_s - knocks * slack_s) / dt_s)
    before = {num(v, GilKeys.TID): v for v in sub(earlier, GilKeys.THREADS).values() if isinstance(v, Mapping)}
    knocker_runq = 0.0
    others: list[tuple[float | None, float | None]] = []
    for name, v in sub(payload, GilKeys.THREADS).items():
        if not isinstance(v, Mapping):
            continue
        # A thread born within the interval: its totals are all the interval's.
        was = before.get(num(v, GilKeys.TID), {})
        run_ns, runq_ns = num(v, GilKeys.RUN_NS), num(v, GilKeys.RUNQ_NS)
        if run_ns is None or runq_ns is None:
            return None
        cpu = max(0.0, run_ns - (num(was, GilKeys.RUN_NS) or 0.0)) / (dt_s * 1e9)
        runq = max(0.0, runq_ns - (num(was, GilKeys.RUNQ_NS) or 0.0)) / (dt_s * 1e9)
        if str(name) == KNOCKER_THREAD:
            knocker_runq = runq
        else:
            others.append((cpu, runq))
    return contention, knocker_runq, others


def check(ctx: Context) -> Iterator[Finding]:
    payload = ctx.probe(ProbeName.GIL)
    seen_wait = probe_wait(payload, ctx.first_probe(ProbeName.GIL))
    contention = seen_wait.share if seen_wait is not None else None
    runq = seen_wait.runq_share if seen_wait is not None else None
    if payload is not None and payload.get(GilKeys.FREE_THREADED) is True:
        return
    sampled = [t for t in ctx.sampled() if not _idle_by_cpu(t)]
    waiters = sorted(((t, t.shares.get(ThreadState.GIL_WAIT, 0.0)) for t in sampled), key=lambda x: -x[1])
    heavy_waiters = [(t, s) for t, s in waiters if lower_bound(s, t.n_samples) >= THREAD_WAIT_SHARE]
    # A side thread that holds the GIL most of the time leaves the stages' Python threads the rest, however the
    # machine schedules them (on an oversubscribed machine their waits also look like CPU waits).
    # Without stages, the threads that train (the wait-for graph's start: autograd's backward, an optimizer step)
    # want the GIL between every op they launch.
    training = set(ctx.waits.chain[0].threads) if ctx.waits.chain else set()
    feeders = _feeders(ctx, training)
    monopolies = [t for t in sampled if t.stage is Stage.OTHER and t.name not in training | feeders and (
        lower_bound(t.gil_held_pct / 100.0, t.n_samples) >= MONOPOLY_SHARE or _burns_python(t))]
    wanting = [t for t in sampled if t.stage in PIPELINE_STAGES
               and t.shares.get(ThreadState.PYTHON, 0.0) + t.shares.get(ThreadState.GIL_WAIT, 0.0) >= WANTS_PYTHON_SHARE]
    if not any(t.stage in PIPELINE_STAGES for t in sampled):
        wanting = [t for t in sampled if t.name in training]
    monopoly = monopolies[0] if monopolies and wanting else None
    hidden = _hidden_wait(ctx, sampled, training)
    if (contention is None or contention < CONTENTION_WARNING_SHARE) and not heavy_waiters and monopoly is None:
        if hidden is not None:
            yield _hidden_finding(ctx, *hidden)
        else:
            seen = _native_wait(ctx, sampled, training)
            if seen is not None:
                yield _native_finding(ctx, *seen)
        return
    only_monopoly = monopoly is not None and not heavy_waiters and (contention or 0.0) < CONTENTION_WARNING_SHARE
    if only_monopoly:
        heavy_waiters = [(t, t.shares.get(ThreadState.GIL_WAIT, 0.0)) for t in wanting]
    # Who holds it is worth naming even from few samples (it is a name, not a rate).
    holders = sorted((t for t in ctx.threads if t.n_samples > 0), key=lambda t: -t.gil_held_pct)
    holders = [t for t in holders if t.gil_held_pct > 0][:SHOWN]
    evidence: list[tuple[str, str]] = []
    if contention is not None:
        evidence.append(("GIL contention (probe)", pct(contention) + (f" (after {pct(runq)} waiting for a CPU)"
                                                                      if runq else "")))
        mean_ms, p99_ms = num(payload, GilKeys.WAIT_MEAN_MS), num(payload, GilKeys.WAIT_P99_MS)
        if mean_ms is not None:
            evidence.append(("wait per acquire", f"mean {mean_ms:.1f} ms" + (f", p99 {p99_ms:.1f} ms" if p99_ms is not None else "")))
    for t in holders:
        evidence.append((f"holds: {t.name}", f"{t.gil_held_pct:.0f}% of samples" + _where(ctx, t)))
    cpu = sorted(((str(n), num(v, GilKeys.CPU_SHARE)) for n, v in sub(payload, GilKeys.THREADS).items() if isinstance(v, Mapping)),
                 key=lambda nv: -(nv[1] or 0.0))
    if cpu and cpu[0][1]:
        evidence.append(("CPU by thread (probe)", ", ".join(f"{n} {pct(v)}" for n, v in cpu[:SHOWN] if v is not None)))
    for t, share in waiters[:SHOWN]:
        if share > 0:
            evidence.append((f"waits: {t.name}", f"{pct(share)} of samples" + _cpu_text(t)))
    worst = max(contention or 0.0, heavy_waiters[0][1] if heavy_waiters else 0.0,
                monopoly.gil_held_pct / 100.0 * 0.5 if monopoly is not None else 0.0)
    if monopoly is not None and not is_na(monopoly.cpu_pct):
        evidence.append((f"{monopoly.name} CPU", f"{float(monopoly.cpu_pct):.0f}% of a core (/proc), "  # type: ignore[arg-type]
                                                 f"Python in {pct(monopoly.shares.get(ThreadState.PYTHON, 0.0))} of its samples"))
    if monopoly is not None:
        evidence.append(("GIL monopoly", f"{monopoly.name} holds it in {monopoly.gil_held_pct:.0f}% of samples: the "
                                         f"pipeline's Python threads ({', '.join(t.name for t in wanting[:SHOWN])}) "
                                         "get it at most the rest"))
    waiting = threads_text([t.name for t, _ in heavy_waiters], SHOWN)
    verb = "waits" if len(heavy_waiters) == 1 else "wait"
    hog = monopoly or (holders[0] if holders else None)
    if only_monopoly and monopoly is not None:
        claim = (f"GIL contention: {monopoly.name} (not a pipeline stage) holds the GIL {monopoly.gil_held_pct:.0f}% "
                 f"of the time{_where(ctx, monopoly)}: {waiting} {'gets' if len(heavy_waiters) == 1 else 'get'} it "
                 "only in what is left")
    elif hog is not None and waiting:
        role = "" if hog.stage in PIPELINE_STAGES else " (not a pipeline stage)"
        claim = (f"GIL contention: {hog.name}{role} holds the GIL {hog.gil_held_pct:.0f}% of the time{_where(ctx, hog)} "
                 f"while {waiting} {verb} for it ({pct(worst)})")
    elif hog is not None:
        claim = f"GIL contention ({pct(worst)} of the time a thread waits): {hog.name} holds it most{_where(ctx, hog)}"
    else:
        claim = f"GIL contention: threads wait for the GIL {pct(worst)} of the time"
    stages = tuple(sorted({t.stage for t, _ in heavy_waiters} - {Stage.OTHER}))
    impact = worst
    severity = Severity.WARNING
    if hog is not None and monopoly is None and hog.name in feeders and \
            any(t.name != hog.name for t, _ in heavy_waiters):
        # The holder makes what the waiting threads consume (a queue's producer, a pool's worker): its Python is the
        # pipeline's own work, and the threads share one interpreter by design. Said, with its share; a warning is
        # for a thread off that path (its cost is avoidable) or for what makes the feeder's work slow (its rules).
        severity = Severity.INFO
        claim += (f"; {hog.name} makes what {waiting} {'consumes' if len(heavy_waiters) == 1 else 'consume'}: the "
                  "threads of one pipeline share the interpreter")
    if hog is not None:
        compiling = hog.shares.get(ThreadState.COMPILE, 0.0)
        if compiling >= HOG_COMPILING_SHARE:
            # The holder runs the compiler (dynamo is Python): the contention is a consequence of the compiling,
            # whose own finding is the cause to fix first.
            claim += f"; {hog.name} is compiling (torch.compile) {pct(compiling)} of the time"
            evidence.append((f"{hog.name} compiling", pct(compiling)))
            impact = worst * (1.0 - compiling)
    yield Finding(
        rule_id="gil-contention",
        severity=severity,
        claim=claim,
        evidence=tuple(evidence),
        remedy="Cut the Python work of the thread that holds the GIL (move side work such as metrics, logging or "
        "data prep out of the process or make it rarer; compile the step, fuse tiny ops, no per-chunk Python "
        "loops in the hot threads).",
        impact=impact,
        stages=stages,
        looks_below=_looks_below(ctx, hog),
    )


def _feeders(ctx: Context, training: set[str]) -> set[str]:
    """The threads whose work the training threads consume: those they wait on through a queue or a thread pool's
    futures (the wait-for graph's edges), the producer stage's threads where the consumer stage trains, and a thread
    pool's workers (they run what the program submitted to them, for whoever collects the futures: a trainer that
    keeps ahead of its pool never waits on it in the window, so no edge shows it)."""
    out: set[str] = {t.name for t in ctx.threads if t.n_samples > 0 and any(
        is_pool_worker(thread) for thread, _ in ctx.stats_rows(t)[-1:])}
    for node in ctx.waits.threads:
        if node.name in training or node.stage is Stage.DRAFTER:
            for edge in node.waits:
                if edge.kind == WAIT_QUEUE_GET or (edge.kind == WAIT_CONDITION and edge.target == POOL_FUTURES):
                    out.update(edge.to_threads)
    if any(t.stage is Stage.DRAFTER for t in ctx.threads):
        out.update(t.name for t in ctx.threads if t.stage is Stage.TARGET)
    return out - training


def _hidden_wait(ctx: Context, sampled: list[ThreadStats],
                 training: set[str]) -> tuple[ThreadStats, float, ThreadStats] | None:
    """(a thread doing the work, % of the window it slept unseen, the side thread holding the GIL), when /proc shows
    a thread that trains or belongs to a pipeline stage, computing in (nearly) all its samples, asleep a measurable
    share of the window while a thread off the training path and outside the stages holds the GIL."""
    holders = sorted((t for t in sampled if t.name not in training and t.stage is Stage.OTHER
                      and lower_bound(t.gil_held_pct / 100.0, t.n_samples) >= SIDE_HOLDER_SHARE),
                     key=lambda t: -t.gil_held_pct)
    if not holders:
        return None
    found: list[tuple[float, ThreadStats]] = []
    for t in sampled:
        working = t.name in training or (t.stage in PIPELINE_STAGES and not t.helper)
        if not working or sum(t.shares.get(s, 0.0) for s in _WORK) < HIDDEN_WORK_SHARE:
            continue
        if is_na(t.cpu_pct) or is_na(t.runq_pct):
            continue
        slept = 100.0 - float(t.cpu_pct) - float(t.runq_pct)  # type: ignore[arg-type]
        if slept >= HIDDEN_SLEEP_PCT:
            found.append((slept, t))
    if not found:
        return None
    slept, waiter = max(found, key=lambda st: st[0])
    return waiter, slept, holders[0]


def _hidden_finding(ctx: Context, waiter: ThreadStats, slept_pct: float, hog: ThreadStats) -> Finding:
    cpu, runq = float(waiter.cpu_pct), float(waiter.runq_pct)  # type: ignore[arg-type]
    claim = (f"GIL contention: {hog.name} (not a pipeline stage) holds the GIL {hog.gil_held_pct:.0f}% of the time"
             f"{_where(ctx, hog)}, and {waiter.name}, which computes in {pct(_work_share(waiter))} of its samples, was "
             f"asleep {slept_pct:.0f}% of the window: waiting for the GIL between its ops, where its stacks cannot "
             "show it")
    evidence = (
        (f"{waiter.name} (/proc)", f"on a CPU {cpu:.0f}%, runnable and waiting for a CPU {runq:.0f}%, asleep "
                                   f"{slept_pct:.0f}% of the window"),
        (f"{waiter.name} (samples)", f"computing in {pct(_work_share(waiter))}: no wait its code makes"),
        (f"holds: {hog.name}", f"{hog.gil_held_pct:.0f}% of samples{_where(ctx, hog)}" + _cpu_text(hog)),
    )
    return Finding(
        rule_id="gil-contention", severity=Severity.WARNING, claim=claim, evidence=evidence,
        looks_below=_looks_below(ctx, hog),
        remedy="Cut the Python work of the thread that holds the GIL (move side work such as metrics, weight "
        "histograms or logging out of the process, make it rarer, or do it in vectorised torch/numpy calls that "
        "release the GIL); `dflash-diag run` adds the GIL probe, which measures each wait.",
        impact=slept_pct / 100.0,
        # The stage that loses the time (a cause of its slowness); a training thread outside the stages: the process.
        stages=(waiter.stage,) if waiter.stage in PIPELINE_STAGES else ())


def _native_wait(ctx: Context, sampled: list[ThreadStats],
                 training: set[str]) -> tuple[ThreadStats, GilWaits, ThreadStats | None] | None:
    """The thread whose speed is the program's (the limiting stage's; else one that trains) waiting for the GIL most
    in its native samples, with who holds it (``native_gil_wait``)."""
    limiting = ctx.pipeline.bottleneck
    return native_gil_wait(ctx, [t for t in sampled if (
        t.stage is limiting if limiting in PIPELINE_STAGES else (t.name in training or not training))])


def native_gil_wait(ctx: Context, candidates: list[ThreadStats]
                    ) -> tuple[ThreadStats, GilWaits, ThreadStats | None] | None:
    """(the candidate waiting for the GIL most in its native samples, its waits, the thread holding the GIL most in
    the window's dumps), when that wait is ``NATIVE_WAIT_SHARE`` of its samples (lower bound); None without a
    native profile."""
    native = ctx.obs.native
    if native is None:
        return None
    seen = []
    for t in candidates:
        if t.os_thread_id is None:
            continue
        waits = gil_waits(thread_stacks(native, {t.os_thread_id}))
        if waits.samples >= MIN_SAMPLES and lower_bound(waits.share, waits.samples) >= NATIVE_WAIT_SHARE:
            seen.append((waits.share, t, waits))
    if not seen:
        return None
    _, waiter, waits = max(seen, key=lambda s: s[0])
    holders = sorted((t for t in ctx.threads if t.n_samples > 0 and t.name != waiter.name and t.gil_held_pct > 0),
                     key=lambda t: -t.gil_held_pct)
    return waiter, waits, holders[0] if holders else None


def native_gil_text(ctx: Context, waiter: ThreadStats, waits: GilWaits, hog: ThreadStats | None) -> str:
    """"MainThread waits for the GIL in 69% of its native stack samples (taking it back after ...), while
    sympy-generator holds it 41% of the time in ... (where, and the settings its code reads)"."""
    at = waits.takers
    text = (f"{waiter.name} waits for the GIL in {pct(waits.share)} of its native stack samples"
            + (f" (taking it back after {at})" if at else ""))
    if hog is not None:
        text += f", while {hog.name} holds it {hog.gil_held_pct:.0f}% of the time{_where(ctx, hog)}"
    return text


def _native_finding(ctx: Context, waiter: ThreadStats, waits: GilWaits, hog: ThreadStats | None) -> Finding:
    """Information: how much of its time a thread whose speed is the program's waits for the GIL, seen in its
    native stacks, and who holds it meanwhile. Never a warning by itself: some wait is the price of threads, and the
    share alone does not say how much of it the holder could give back."""
    at = waits.takers
    evidence = [(f"{waiter.name} (py-spy --native --idle)",
                 f"{waits.waiting} of {waits.samples} samples in a condition wait for the GIL"
                 + (f", after {at}" if at else "")),
                (f"{waiter.name} (Python stacks)", f"GIL wait in {pct(waiter.shares.get(ThreadState.GIL_WAIT, 0.0))} "
                                                   "of its samples: a wait below a Python call shows as the call")]
    if hog is not None:
        evidence.append((f"holds: {hog.name}", f"{hog.gil_held_pct:.0f}% of samples{_where(ctx, hog)}{_cpu_text(hog)}"))
    return Finding(
        rule_id="gil-contention", severity=Severity.INFO,
        claim="GIL contention: " + native_gil_text(ctx, waiter, waits, hog), evidence=tuple(evidence),
        remedy="Cut the Python work of the thread that holds the GIL (a C implementation of what it runs, vectorised "
        "calls that release the GIL, or the work moved to a process of its own); `dflash-diag run` adds the GIL "
        "probe, which measures each wait.",
        impact=waits.share,
        # The GIL is the process's: a wait for it explains every slow stage, after any cause aimed at that stage
        # (the linker ranks those first): information seen only in the native look never hides one named before it.
        stages=())


def _work_share(t: ThreadStats) -> float:
    return sum(t.shares.get(s, 0.0) for s in _WORK)


def _burns_python(t: ThreadStats) -> bool:
    """A thread that runs Python in most samples and uses half a core or more (/proc) holds the GIL at least that
    share of the time: Python only runs with it. Robust where a few samples cannot show the share."""
    cpu = None if is_na(t.cpu_pct) else float(t.cpu_pct)  # type: ignore[arg-type]
    return cpu is not None and cpu >= MONOPOLY_CPU_PCT and t.shares.get(ThreadState.PYTHON, 0.0) >= 0.5


def _idle_by_cpu(t: ThreadStats) -> bool:
    return not is_na(t.cpu_pct) and float(t.cpu_pct) < WAITING_THREAD_CPU_PCT  # type: ignore[arg-type]


def _cpu_text(t: ThreadStats) -> str:
    return "" if is_na(t.cpu_pct) else f", CPU {float(t.cpu_pct):.0f}% of a core"  # type: ignore[arg-type]


# One line holding this share of a holder's samples is one call there (a loop of Python spreads over its lines).
ONE_CALL_LINE_SHARE = 0.5


def _looks_below(ctx: Context, t: ThreadStats | None) -> tuple[int, ...]:
    """The holder's kernel TID where its Python frames end at its own line (no installed package's Python below it
    holds its work) and no native profile was taken yet: that line's C call is what it holds the GIL for, which
    only native stacks show."""
    if t is None or t.os_thread_id is None or ctx.obs.native is not None:
        return ()
    rows = ctx.stats_rows(t)
    spots = hot_functions(rows, n=1)
    if not spots or spots[0].line_share < ONE_CALL_LINE_SHARE or work_library_text(rows):
        return ()
    return (t.os_thread_id,)


def _where(ctx: Context, t: ThreadStats) -> str:
    """" in fn (file:line)", with the installed package most of its samples run inside (what its Python is); where
    its Python frames name nothing below the line and the native profile has the thread, the C code it runs there
    (" (its native samples: load [_pickle.c] 100%, mostly in read)": the line's C call; torch's kernels, which
    release the GIL, left out), and its C library chains (``libc.threads_libc_text``)."""
    rows = ctx.stats_rows(t)
    spots = hot_functions(rows, n=1)
    if not spots:
        return f" at {t.top_frame.short_filename}:{t.top_frame.line}" if t.top_frame else ""
    library = work_library_text(rows)
    if not library and t.os_thread_id is not None:
        # the C code under its line, and the C library's calls there (a read per byte of an unbuffered stream)
        native = "; ".join(x for x in (holder_native_text(ctx.obs.native, {t.os_thread_id}),
                                       libc_text(ctx, {t.os_thread_id})) if x)
        library = f" ({native})" if native else ""
    return f" in {spots[0].function} ({spots[0].site}){library}{settings_text(ctx, rows)}"
