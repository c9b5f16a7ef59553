"""The process's own polling threads take the CPUs its working threads wait for: threads the kernel or a library
starts inside the process that spin on a CPU for it while there is nothing to do (an io_uring ring's
submission-queue poller), not the program's work. Only names the catalogue knows for such pollers are weighed: a
process's unnamed native threads (OpenMP, MKL: they share its name) run its own ops, which ``cpu-oversubscribed``
weighs as pools; an autograd or NCCL thread runs its steps.

From the scheduler's sweeps alone: each thread's CPU and run delay (schedstat) and its name (``comm``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from dflash_diag.analysis.findings._context import Context, pct
from dflash_diag.analysis.findings._registry import RuleSpec
from dflash_diag.analysis.findings.scheduler import (
    RUN_DELAY_SHARE,
    WARNING_COST,
    mean_delay,
    stages_of,
    taker_cost,
    thread_names,
    wait_rows,
    working_threads,
)
from dflash_diag.analysis.sched import summary_of
from dflash_diag.model import Finding, Severity
from dflash_diag.model.common import is_na
from dflash_diag.model.sched import SchedSummary, ThreadSched

RULES = (RuleSpec("own-threads-take-cpu", sampled=True),)

# A non-Python thread of the process is busy from this share of one CPU; together such threads are weighed from
# this many CPUs' worth of use.
BUSY_THREAD_CPU = 0.15
TAKERS_MIN_CPUS = 0.3
SHOWN = 3

# Polling threads the kernel or a library starts inside a process, by name (the kernel's ``comm``): what each is,
# and what starts it.
KNOWN_POLLERS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^iou-sqp-\d*$"),
     "io_uring's submission-queue polling thread (a ring set up with IORING_SETUP_SQPOLL: the kernel polls the ring on "
     "a CPU for sq_thread_idle ms after each submission before it sleeps)"),
)


def known_thread(name: str) -> str:
    return next((text for pattern, text in KNOWN_POLLERS if pattern.search(name)), "")


def check(ctx: Context) -> Iterator[Finding]:
    summary = summary_of(ctx.obs)
    if is_na(summary):
        return
    assert isinstance(summary, SchedSummary)
    takers = sorted((t for t in summary.threads if not t.python and t.cpu_share >= BUSY_THREAD_CPU
                     and known_thread(t.name)), key=lambda t: -t.cpu_share)
    used = sum(t.cpu_share for t in takers)
    if not takers or used < TAKERS_MIN_CPUS:
        return
    working = working_threads(ctx, summary)
    delay = mean_delay(working)
    if not working or delay < RUN_DELAY_SHARE:
        return
    wanted = sum(t.cpu_share + t.runq_share for t in takers)
    cost = taker_cost(delay, wanted, summary)
    groups = _by_kind(takers)
    named = "; ".join(f"{len(ts)} `{kind}` thread{'s' if len(ts) > 1 else ''} ({_cpus(ts)}): {known_thread(ts[0].name)}"
                      for kind, ts in groups[:SHOWN])  # every taker is a catalogued poller
    claim = (f"the process's own polling threads take the CPUs its working threads wait for: {named}; together "
             f"{used:.2f} CPUs of {summary.cores:g}, while {thread_names(working)} waited for a CPU {pct(delay)} of the "
             "window")
    evidence = [(f"{t.name} (tid {t.tid}, /proc)", f"on a CPU {pct(t.cpu_share)} of the window, runnable and waiting "
                                                   f"for a CPU {pct(t.runq_share)}") for t in takers[:4]]
    evidence += [("threads runnable (demand)", f"{summary.demand:.1f} on {summary.cores:g} CPUs; these threads "
                                               f"{wanted:.1f} of it"), *wait_rows(working)]
    if summary.external_runnable is not None:
        evidence.append(("other tasks runnable on the machine", f"{summary.external_runnable:.1f} on average"))
    costly = cost >= WARNING_COST
    yield Finding(
        rule_id="own-threads-take-cpu", severity=Severity.WARNING if costly else Severity.INFO, claim=claim,
        evidence=tuple(evidence),
        remedy=("Stop what keeps those threads busy: a polling thread that spins (io_uring SQPOLL with a long "
                "sq_thread_idle: a short idle time, or no SQPOLL where submissions are rare), a library's progress or "
                "keep-alive thread; or pin it to a CPU the working threads do not use."),
        impact=cost if costly else 0.0, stages=stages_of(working) if costly else ())


def _by_kind(threads: list[ThreadSched]) -> list[tuple[str, list[ThreadSched]]]:
    """The threads grouped by name without its digits (``iou-sqp-8287`` -> ``iou-sqp-N``), busiest group first."""
    groups: dict[str, list[ThreadSched]] = {}
    for t in threads:
        groups.setdefault(re.sub(r"\d+", "N", t.name), []).append(t)
    return sorted(groups.items(), key=lambda kv: -sum(t.cpu_share for t in kv[1]))


def _cpus(threads: list[ThreadSched]) -> str:
    return ", ".join(f"{t.cpu_share:.2f} CPUs" for t in threads[:4]) + " on a CPU"
