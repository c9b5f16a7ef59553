"""GIL contention: who holds the GIL, who waits for it, and how much."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from dflash_contract.board import GilKeys, ProbeName
from dflash_diag.analysis.findings._context import Context, lower_bound, num, pct, sub
from dflash_diag.model import Finding, Severity, ThreadState

# With N busy Python threads some waiting is normal; when the process as a whole spends a third of the
# window with a thread waiting for the GIL, Python (not the GPU) paces the pipeline.
CONTENTION_WARNING_SHARE = 0.33
# Sampled: a thread that waits for the GIL in a fifth of its samples (at one-sigma confidence) loses a fifth
# of its throughput.
THREAD_WAIT_SHARE = 0.20
SHOWN = 3


def check(ctx: Context) -> Iterator[Finding]:
    payload = ctx.probe(ProbeName.GIL)
    contention = num(payload, GilKeys.CONTENTION_SHARE)
    if payload is not None and payload.get(GilKeys.FREE_THREADED) is True:
        return
    sampled = list(ctx.sampled())
    waiters = sorted(((t, t.shares.get(ThreadState.GIL_WAIT, 0.0)) for t in sampled), key=lambda x: -x[1])
    heavy_waiters = [(t, s) for t, s in waiters if lower_bound(s, t.n_samples) >= THREAD_WAIT_SHARE]
    if (contention is None or contention < CONTENTION_WARNING_SHARE) and not heavy_waiters:
        return
    # Who holds it is worth naming even from few samples (it is a name, not a rate).
    holders = sorted((t for t in ctx.threads if t.n_samples > 0), key=lambda t: -t.gil_held_pct)
    holders = [t for t in holders if t.gil_held_pct > 0][:SHOWN]
    evidence: list[tuple[str, str]] = []
    if contention is not None:
        evidence.append(("GIL contention (probe)", pct(contention)))
        mean_ms, p99_ms = num(payload, GilKeys.WAIT_MEAN_MS), num(payload, GilKeys.WAIT_P99_MS)
        if mean_ms is not None:
            evidence.append(("wait per acquire", f"mean {mean_ms:.1f} ms" + (f", p99 {p99_ms:.1f} ms" if p99_ms is not None else "")))
    for t in holders:
        evidence.append((f"holds: {t.name}", f"{t.gil_held_pct:.0f}% of samples" + (f" at {t.top_frame.short_filename}:{t.top_frame.line}" if t.top_frame else "")))
    cpu = sorted(((str(n), num(v, GilKeys.CPU_SHARE)) for n, v in sub(payload, GilKeys.THREADS).items() if isinstance(v, Mapping)),
                 key=lambda nv: -(nv[1] or 0.0))
    if cpu and cpu[0][1]:
        evidence.append(("CPU by thread (probe)", ", ".join(f"{n} {pct(v)}" for n, v in cpu[:SHOWN] if v is not None)))
    for t, share in waiters[:SHOWN]:
        if share > 0:
            evidence.append((f"waits: {t.name}", f"{pct(share)} of samples"))
    worst = max(contention or 0.0, heavy_waiters[0][1] if heavy_waiters else 0.0)
    waiting = ", ".join(t.name for t, _ in heavy_waiters[:SHOWN])
    if holders and waiting:
        claim = f"GIL contention: {holders[0].name} holds the GIL while {waiting} wait ({pct(worst)})"
    elif holders:
        claim = f"GIL contention ({pct(worst)} of the time a thread waits): {holders[0].name} holds it most"
    else:
        claim = f"GIL contention: threads wait for the GIL {pct(worst)} of the time"
    yield Finding(
        rule_id="gil-contention",
        severity=Severity.WARNING,
        claim=claim,
        evidence=tuple(evidence),
        remedy="Cut Python work in the hot threads (compile the step, fewer tiny ops: fused kernels, no "
        "per-chunk Python loops), move side work (logging, data prep) out of the process or make it rarer.",
        impact=worst,
    )
