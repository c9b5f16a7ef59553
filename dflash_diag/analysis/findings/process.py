"""The process as the kernel sees it: stopped (SIGSTOP), a zombie, or stuck in uninterruptible sleep.

Such a process is the headline: its stacks still read (py-spy reads memory) but nothing in them moves, so a
stage verdict ("drafter-bound, native 100%") would be a false claim. Evidence is /proc only: the state letter
of every thread in every /proc reading of the window, and the process's state at the end.
"""

from __future__ import annotations

from collections.abc import Iterator

from dflash_diag.analysis.findings._context import Context, pct
from dflash_diag.analysis.findings._registry import RuleSpec
from dflash_diag.model import Finding, Severity
from dflash_diag.model.findings import STATE

# A process stopped in at least half of the window's /proc readings (and at its end) is stopped, not slow.
STOPPED_SHARE = 0.5
# Threads in uninterruptible sleep half of the time cannot do the work they are sampled doing.
D_STATE_SHARE = 0.5
MIN_READINGS = 2
_STOPPED = frozenset("Tt")

RULES = (
    RuleSpec("process-stopped", kind=STATE, cannot_run=True),
    RuleSpec("process-zombie", kind=STATE, cannot_run=True),
    RuleSpec("process-uninterruptible", kind=STATE),
)


def check(ctx: Context) -> Iterator[Finding]:
    process = ctx.obs.process
    final = process.state if process is not None else ""
    sweeps = [s for s in ctx.obs.proc if s]
    if final == "Z":
        yield _zombie(ctx)
        return
    stopped = [all(t.state in _STOPPED for t in sweep) for sweep in sweeps]
    stopped_share = sum(stopped) / len(stopped) if stopped else 0.0
    ends_stopped = final in _STOPPED or (bool(stopped) and stopped[-1])
    if ends_stopped and (stopped_share >= STOPPED_SHARE or len(sweeps) < MIN_READINGS):
        yield _stopped(ctx, final or "T", stopped_share, len(sweeps))
        return
    yield from _uninterruptible(ctx, sweeps)


def _stopped(ctx: Context, state: str, share: float, readings: int) -> Finding:
    pid = ctx.obs.pid
    traced = state == "t"
    evidence = [("/proc state", f"{state} ({'stopped by a debugger' if traced else 'stopped by a signal'})"),
                ("readings stopped", f"{pct(share)} of {readings} /proc readings" if readings else "the final one")]
    evidence.append(("window", f"{ctx.obs.window_s:.1f} s"))
    return Finding(
        rule_id="process-stopped",
        severity=Severity.CRITICAL,
        claim=f"process {pid} is stopped ({'tracing stop: a debugger holds it' if traced else 'SIGSTOP/SIGTSTP'}): "
        "it does no work until it is resumed; the stacks show where it was stopped, not where it spends time",
        evidence=tuple(evidence),
        remedy="Detach the debugger (gdb, strace) that stopped it." if traced else
        f"Resume it: `kill -CONT {pid}` (or `fg` in the shell where Ctrl-Z suspended it).",
        impact=1.0,
        kind=STATE,
    )


def _zombie(ctx: Context) -> Finding:
    return Finding(
        rule_id="process-zombie",
        severity=Severity.CRITICAL,
        claim=f"process {ctx.obs.pid} has exited and is a zombie (its parent has not reaped it): nothing runs",
        evidence=(("/proc state", "Z (zombie)"),),
        remedy="Look at the program's log for why it exited; the zombie goes away when its parent waits for it "
        "(or exits).",
        impact=1.0,
        kind=STATE,
    )


def _uninterruptible(ctx: Context, sweeps: list[tuple]) -> Iterator[Finding]:  # type: ignore[type-arg]
    if len(sweeps) < MIN_READINGS:
        return
    names = {t.os_thread_id: t.name for t in ctx.threads if t.os_thread_id is not None}
    in_d: dict[int, int] = {}
    seen: dict[int, int] = {}
    for sweep in sweeps:
        for t in sweep:
            seen[t.tid] = seen.get(t.tid, 0) + 1
            if t.state == "D":
                in_d[t.tid] = in_d.get(t.tid, 0) + 1
    stuck = sorted(((tid, n / seen[tid]) for tid, n in in_d.items() if n / seen[tid] >= D_STATE_SHARE),
                   key=lambda x: -x[1])
    if not stuck:
        return
    all_stuck = len(stuck) == len(seen) and all(share >= 0.99 for _, share in stuck)
    shown = ", ".join(f"{names.get(tid, f'tid {tid}')} {pct(share)}" for tid, share in stuck[:6])
    yield Finding(
        rule_id="process-uninterruptible",
        severity=Severity.CRITICAL if all_stuck else Severity.WARNING,
        claim=(f"process {ctx.obs.pid} is stuck in the kernel: every thread in uninterruptible sleep (D) all window"
               if all_stuck else
               f"{len(stuck)} thread(s) spend most of the window in uninterruptible sleep (D): blocked in the "
               "kernel on disk, network file system or driver I/O"),
        evidence=(("threads in D", shown), ("/proc readings", str(len(sweeps)))),
        remedy="Look at what the threads wait on in the kernel (`cat /proc/PID/task/TID/stack` as root, "
        "`/proc/PID/task/TID/wchan`): a hung NFS mount, a full or failing disk, a GPU driver fault (dmesg).",
        impact=1.0 if all_stuck else max(s for _, s in stuck) * len(stuck) / max(1, len(seen)),
        kind=STATE,
    )
