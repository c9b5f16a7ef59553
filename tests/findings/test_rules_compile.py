"""The torch.compile family (analysis/findings/compile.py): recompile storms, the recompile limit, graph breaks,
warm-up, compiles from several threads."""

from __future__ import annotations

from findings_builders import (
    HEALTHY_APP,
    HEALTHY_PROBES,
    NOW_S,
    _one,
    _run,
    board,
    healthy_board,
    thread_stats,
)

from dflash_diag.model import Severity, ThreadState


def test_recompile_storm_lists_reasons() -> None:
    b = healthy_board(compile={"recompiles": 12, "recent_recompiles": [
        {"function": "flex_attention", "thread": "drafter-0", "reason": "0/3: tensor 'q' size mismatch at index 2"}] * 4})
    f = _one(_run(boards=(b,)), "compile-recompile-storm")
    assert "size mismatch" in dict(f.evidence)["reason (x4)"]


def test_recompile_limit_fallback_to_eager() -> None:
    b = healthy_board(compile={"recompile_limit_hits": 1, "limit_hits": [
        {"function": "flex_attention", "reason": "requires_grad mismatch", "thread": "drafter-1"}],
        "recompile_limit": {"MainThread": 64, "drafter-1": 8}})
    f = _one(_run(boards=(b,)), "compile-recompile-limit")
    assert "flex_attention" in f.claim and "drafter-1=8" in dict(f.evidence)["recompile_limit by thread"]


def test_graph_breaks_growing_in_window_is_a_warning() -> None:
    first = board({**HEALTHY_PROBES, "compile": {**HEALTHY_PROBES["compile"], "graph_breaks": 2}}, HEALTHY_APP)
    last = board({**HEALTHY_PROBES, "compile": {**HEALTHY_PROBES["compile"], "graph_breaks": 6,
                                                 "graph_break_reasons": {"Unsupported Tensor.item() call": 6}}},
                 HEALTHY_APP, wall_time_s=NOW_S + 2)
    f = _one(_run(boards=(first, last), now=NOW_S + 2), "compile-graph-breaks")
    assert f.severity == Severity.WARNING and dict(f.evidence)["new in this window"] == "4"


def test_compile_in_progress_is_warm_up() -> None:
    b = healthy_board(compile={"compiling_now": True, "compile_time_s": 31.0})
    f = _one(_run(boards=(b,)), "warming-up")
    assert f.severity == Severity.INFO and f.kind == "state"
    assert "31 s of finished compiles (probe)" in f.claim


def test_compile_from_several_threads_on_unsafe_torch() -> None:
    b = healthy_board(compile={"by_thread": {"drafter-0": {"compiles": 2}, "drafter-1": {"compiles": 2}}})
    f = _one(_run(boards=(b,)), "compile-multi-thread")
    assert "drafter-0, drafter-1" in dict(f.evidence)["compiling threads"]


def test_concurrent_compiles_seen_in_stacks() -> None:
    threads = (thread_stats("drafter-0", "drafter", {ThreadState.COMPILE: 1.0}, tid=12),
               thread_stats("drafter-1", "drafter", {ThreadState.COMPILE: 0.8, ThreadState.NATIVE: 0.2}, tid=13))
    findings = _run(threads=threads)
    f = _one(findings, "compile-multi-thread")
    assert dict(f.evidence)["seen compiling concurrently"] == "drafter-0, drafter-1"
    assert _one(findings, "warming-up").severity == Severity.INFO
