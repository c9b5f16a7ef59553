"""What a torch.profiler trace of the process says (``record --kernels``, ``doctor --kernels-trace``): a GPU left
idle between kernels because the host did not launch the next one in time, and where the GPU's time went.

Only when a trace was taken: the summary is ``analysis.kernels``'s (docs/findings.md says how gaps are judged)."""

from __future__ import annotations

from collections.abc import Iterator

from dflash_diag.analysis.findings._context import Context, pct
from dflash_diag.analysis.findings._registry import RuleSpec
from dflash_diag.analysis.kernels import EDGES, short_kernel_name
from dflash_diag.model import Finding, Severity, Stage, ThreadState
from dflash_diag.model.findings import NOTE
from dflash_diag.model.kernels import (
    AFTER_SYNC,
    LAUNCH_BOUND,
    QUEUED,
    UNATTRIBUTED,
    DeviceKernels,
    KernelSummary,
)

# The GPU idle a fifth of the step waiting for the host to launch its next kernel is a fifth of the GPU's time lost:
# worth a warning. Launch latency alone (a few µs per kernel) stays far below on any GPU-bound step.
LAUNCH_BOUND_WARNING_SHARE = 0.20
LAUNCH_BOUND_INFO_SHARE = 0.05
# Fewer GPU spans than this, or a shorter window, is not a trace of training steps: no verdict on its gaps.
MIN_GPU_SPANS = 50
MIN_WINDOW_US = 50_000.0
# Launching threads that wait on a queue (or idle) this share of their samples are starved of work, not slow to
# launch it: gpu-underused's rule draws the same line (its QUEUE_WAIT_EXPLAINS).
WAITING_EXPLAINS = 0.30
WAITING_STATES = (ThreadState.QUEUE_GET, ThreadState.QUEUE_PUT, ThreadState.IDLE)
# A trace older than this may not describe the process as it runs now: the evidence says how old it is.
STALE_TRACE_S = 600.0
THREADS_SHOWN = 3

RULES = (
    RuleSpec("gpu-launch-bound"),
    RuleSpec("kernel-trace", kind=NOTE, slows=False),
)


def check(ctx: Context) -> Iterator[Finding]:
    summary = ctx.kernels
    if summary is None:
        return
    for device in summary.devices:
        finding = _launch_bound(ctx, summary, device)
        if finding is not None:
            yield finding
    yield _where_gpu_time_goes(ctx, summary)


def host_bound_share(device: DeviceKernels) -> float:
    return device.share(LAUNCH_BOUND) + device.share(AFTER_SYNC)


def span_of(summary: KernelSummary) -> str:
    """What the shares are of: the steps marked in the trace, or its whole window."""
    if summary.step_window_us is not None:
        return f"the step ({summary.steps} steps traced)"
    return f"the traced {summary.window_us / 1e6:.1f} s"


def _launch_bound(ctx: Context, summary: KernelSummary, device: DeviceKernels) -> Finding | None:
    share = host_bound_share(device)
    if share < LAUNCH_BOUND_INFO_SHARE or device.window_us < MIN_WINDOW_US or device.gpu_spans < MIN_GPU_SPANS:
        return None
    launchers = _launchers(ctx, summary, device)
    who = ", ".join(name for name, _, _ in launchers[:THREADS_SHOWN]) or "threads not in the trace"
    sync = device.share(AFTER_SYNC)
    claim = (f"cuda:{device.device} is idle {pct(share)} of {span_of(summary)} between kernels launched by {who}: "
             "launch-bound (each time, the next kernel was launched only after the GPU had run out of work)")
    if sync >= LAUNCH_BOUND_INFO_SHARE:
        claim += f"; {pct(sync)} of it right after a host sync"
    waiting = _waiting_share(ctx, launchers)
    if waiting >= WAITING_EXPLAINS:
        # The launching threads sat in a queue or idle, not launching: the GPU waits for their work to arrive (the
        # pipeline findings say why), not for the launch path. Worth knowing, not this rule's cost to claim.
        claim += (f"; its launching threads wait on a queue or idle {pct(waiting)} of the sampled time, so the "
                  "work arrives late rather than its launches: see the pipeline findings")
    evidence = [("GPU", gpu_line(device)),
                ("launch-bound by thread", ", ".join(f"{name} {pct(s)}" for name, s, _ in launchers[:6]) or "-")]
    longest = [g for g in summary.longest_idle if g.device == device.device][:3]
    if longest:
        evidence.append(("longest gaps", ", ".join(
            f"{g.dur_us / 1e3:.2f} ms ({g.kind}, {thread_label(ctx, summary, g.tid)})" for g in longest)))
    evidence += trace_lines(ctx, summary)
    stages = tuple(sorted({stage for _, _, stage in launchers if stage is not Stage.OTHER}))
    remedy = ("The GPU waits on the host between kernels: fewer, larger kernels per step (torch.compile, fused ops), "
              "CUDA graphs (torch.compile mode='reduce-overhead', torch.cuda.graphs) to launch a step at once, and "
              "no Python work between launches on the launching thread")
    if sync >= LAUNCH_BOUND_INFO_SHARE:
        remedy += "; the syncs drain the GPU's queue: keep values on the device (no .item()/.cpu() inside the step)"
    return Finding(
        rule_id="gpu-launch-bound",
        severity=Severity.WARNING if share >= LAUNCH_BOUND_WARNING_SHARE and waiting < WAITING_EXPLAINS
        else Severity.INFO,
        claim=claim, evidence=tuple(evidence), remedy=remedy + ".", impact=share, stages=stages)


def _waiting_share(ctx: Context, launchers: list[tuple[str, float, str]]) -> float:
    """How much of their sampled time the launching threads (weighted by the idle they caused) spent waiting on a
    queue or idle; 0 when none of them was sampled (torch's autograd thread, a trace without a window)."""
    by_name = {t.name: t for t in ctx.sampled()}
    weighted = total = 0.0
    for name, share, _ in launchers:
        stats = by_name.get(name)
        if stats is None:
            continue
        weighted += share * sum(stats.shares.get(s, 0.0) for s in WAITING_STATES)
        total += share
    return weighted / total if total > 0 else 0.0


def gpu_line(device: DeviceKernels) -> str:
    idle = device.idle_us
    parts = [f"{name} {pct(idle.get(kind, 0.0) / device.window_us)}"
             for kind, name in ((LAUNCH_BOUND, "launch-bound"), (AFTER_SYNC, "after host syncs"), (QUEUED, "queued"),
                                (UNATTRIBUTED, "launch not traced"), (EDGES, "before/after the first/last kernel"))
             if idle.get(kind, 0.0) > 0]
    busy = device.busy_us / device.window_us if device.window_us else 0.0
    return (f"busy {pct(busy)} ({device.gpu_spans} kernels, copies, sets); idle {pct(1 - busy)}"
            + (f": {', '.join(parts)}" if parts else ""))


def _launchers(ctx: Context, summary: KernelSummary, device: DeviceKernels) -> list[tuple[str, float, Stage]]:
    """(thread, share of the window it kept the GPU waiting, its stage), most first."""
    totals: dict[int, float] = {}
    for kind in (LAUNCH_BOUND, AFTER_SYNC):
        for tid, us in device.idle_by_thread.get(kind, {}).items():
            totals[tid] = totals.get(tid, 0.0) + us
    stages = {t.os_thread_id: t.stage for t in ctx.threads if t.os_thread_id is not None}
    ranked = sorted(totals.items(), key=lambda kv: -kv[1])
    return [(thread_label(ctx, summary, tid), us / device.window_us, stages.get(tid, Stage.OTHER)) for tid, us in ranked]


def thread_label(ctx: Context, summary: KernelSummary, tid: int | None) -> str:
    """The name a user knows: the sampled thread's (its Python name), else the trace's."""
    for t in ctx.threads:
        if tid is not None and t.os_thread_id == tid:
            return t.name
    return summary.thread_label(tid)


def trace_lines(ctx: Context, summary: KernelSummary) -> list[tuple[str, str]]:
    """Where the GPU time went, the top kernels, and which trace says so."""
    out: list[tuple[str, str]] = []
    gpu_total = sum(us for _, us in summary.gpu_time_by_phase)
    if gpu_total > 0:
        out.append(("GPU time by phase", ", ".join(f"{p} {pct(us / gpu_total)}" for p, us in summary.gpu_time_by_phase)))
        out.append(("GPU time by launching thread", ", ".join(
            f"{thread_label(ctx, summary, tid)} {pct(us / gpu_total)}" for tid, us, _ in summary.gpu_time_by_thread[:4])))
        out.append(("top kernels", "; ".join(
            f"{short_kernel_name(k.name)} {pct(k.total_us / gpu_total)} ({k.count}x, {k.mean_us:.0f} us)"
            for k in summary.top_kernels[:3])))
    age = ctx.now_wall_s - summary.started_wall_s if summary.started_wall_s is not None else None
    when = "" if age is None else f", taken {age:.0f} s ago" if age < STALE_TRACE_S else (
        f", taken {age / 60:.0f} min ago: it may not describe the process as it runs now")
    left = f"; {summary.spans_left_out} later events not read" if summary.spans_left_out else ""
    out.append(("kernel trace", f"{summary.source or 'torch.profiler'}: {summary.window_us / 1e6:.2f} s, "
                                f"{summary.gpu_spans} GPU spans, {summary.host_spans} host spans{when}{left}"))
    return out


def _where_gpu_time_goes(ctx: Context, summary: KernelSummary) -> Finding:
    if not summary.devices:
        claim = ("the kernel trace holds no GPU work: CPU ops only (the process does not use CUDA, or had not "
                 "initialised it when the trace was taken)")
        return Finding(rule_id="kernel-trace", severity=Severity.INFO, claim=claim,
                       evidence=tuple(trace_lines(ctx, summary)),
                       remedy="Open the trace in https://ui.perfetto.dev to see the ops of each thread.", kind=NOTE)
    busiest = max(summary.devices, key=lambda d: d.busy_us)
    busy = busiest.busy_us / busiest.window_us if busiest.window_us else 0.0
    phases = sum(us for _, us in summary.gpu_time_by_phase)
    split = ", ".join(f"{p} {pct(us / phases)}" for p, us in summary.gpu_time_by_phase[:4]) if phases else "-"
    top = summary.top_kernels[0] if summary.top_kernels else None
    claim = (f"kernel trace: cuda:{busiest.device} ran GPU work {pct(busy)} of {span_of(summary)}; its time went to "
             f"{split}" + (f"; most to {short_kernel_name(top.name)} ({pct(top.total_us / phases)})"
                           if top is not None and phases else ""))
    evidence = [(f"cuda:{d.device}", gpu_line(d)) for d in summary.devices] + trace_lines(ctx, summary)
    return Finding(rule_id="kernel-trace", severity=Severity.INFO, claim=claim, evidence=tuple(evidence),
                   remedy="Open the trace in https://ui.perfetto.dev: each kernel is tied to the call that launched it.",
                   kind=NOTE)


def trace_evidence(ctx: Context, device: int | None = None) -> tuple[str, str] | None:
    """One line for another rule's evidence (gpu-underused, host-sync-storm): what the kernel trace says of the GPU."""
    summary = ctx.kernels
    if summary is None or not summary.devices:
        return None
    chosen = next((d for d in summary.devices if d.device == device), None) if device is not None else None
    chosen = chosen or max(summary.devices, key=lambda d: d.busy_us)
    launchers = _launchers(ctx, summary, chosen)
    by = f" (launched by {', '.join(n for n, _, _ in launchers[:THREADS_SHOWN])})" if launchers else ""
    return ("kernel trace", f"cuda:{chosen.device} idle {pct(1 - chosen.busy_us / chosen.window_us)} of "
                            f"{span_of(summary)}: launch-bound {pct(chosen.share(LAUNCH_BOUND))}, after host syncs "
                            f"{pct(chosen.share(AFTER_SYNC))}{by}")
