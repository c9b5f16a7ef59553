"""A torch.profiler trace's summary (``analysis.kernels``) as JSON: ``doctor --json``'s and ``record --kernels
--json``'s ``kernels`` (docs/findings.md), times in ms. Plain: no screen library."""

from __future__ import annotations

from dflash_diag.model.kernels import KernelSummary


def summary_json(summary: KernelSummary) -> dict[str, object]:
    """The summary as JSON (``doctor --json``'s and ``record --kernels --json``'s ``kernels``): times in ms."""
    def ms(us: float) -> float:
        return round(us / 1e3, 3)

    return {
        "source": summary.source,
        "window_ms": ms(summary.window_us),
        "steps": summary.steps,
        "step_window_ms": None if summary.step_window_us is None else ms(summary.step_window_us),
        "gpu_spans": summary.gpu_spans,
        "host_spans": summary.host_spans,
        "spans_left_out": summary.spans_left_out,
        "devices": [{
            "device": d.device, "window_ms": ms(d.window_us), "busy_ms": ms(d.busy_us),
            "idle_ms": {kind: ms(us) for kind, us in sorted(d.idle_us.items())},
            "idle_by_thread_ms": {kind: [{"tid": tid, "thread": summary.thread_label(tid), "ms": ms(us)}
                                         for tid, us in sorted(by.items(), key=lambda kv: -kv[1])[:8]]
                                  for kind, by in sorted(d.idle_by_thread.items())},
        } for d in summary.devices],
        "gpu_time_by_thread_ms": [{"tid": tid, "thread": summary.thread_label(tid), "ms": ms(us), "spans": n}
                                  for tid, us, n in summary.gpu_time_by_thread[:16]],
        "gpu_time_by_phase_ms": {p: ms(us) for p, us in summary.gpu_time_by_phase},
        "unattributed_gpu_ms": ms(summary.unattributed_gpu_us),
        "top_kernels": [{"name": k.name, "count": k.count, "total_ms": ms(k.total_us), "mean_us": round(k.mean_us, 3)}
                        for k in summary.top_kernels],
        "copies": [{"kind": c.kind, "count": c.count, "bytes": c.bytes, "gpu_ms": ms(c.gpu_us),
                    "host_ms": ms(c.host_us)} for c in summary.copies],
        "matmul_ms": {kind: ms(us) for kind, us in summary.matmul_us},
        "kernel_ms": ms(summary.kernel_us),
        "longest_host_bound_gaps": [{"device": g.device, "kind": g.kind, "ms": ms(g.dur_us),
                                     "thread": summary.thread_label(g.tid), "tid": g.tid}
                                    for g in summary.longest_idle],
    }


__all__ = ["summary_json"]
