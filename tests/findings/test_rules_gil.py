"""The GIL family (analysis/findings/gil.py): contention, its holder and its waiters."""

from __future__ import annotations

from findings_builders import (
    _one,
    _run,
    healthy_board,
    thread_stats,
)

from dflash_diag.model import ThreadState


def test_gil_contention_names_holder_and_waiters() -> None:
    threads = (
        thread_stats("logger", "other", {ThreadState.PYTHON: 0.9}, tid=13, gil_held_pct=90.0),
        thread_stats("drafter-0", "drafter", {ThreadState.GIL_WAIT: 0.5, ThreadState.NATIVE: 0.5}, tid=12),
    )
    b = healthy_board(gil={"contention_share": 0.7, "wait_mean_ms": 9.8, "wait_p99_ms": 43.0,
                           "threads": {"logger": {"cpu_share": 0.95}, "drafter-0": {"cpu_share": 0.3}}})
    f = _one(_run(boards=(b,), threads=threads), "gil-contention")
    assert f.claim.startswith("GIL contention: logger (not a pipeline stage) holds the GIL 90% of the time")
    assert f.claim.endswith("while drafter-0 waits for it (70%)") and f.stages == ("drafter",)
    assert "mean 9.8 ms" in dict(f.evidence)["wait per acquire"]
    assert dict(f.evidence)["CPU by thread (probe)"] == "logger 95%, drafter-0 30%"


def test_gil_contention_from_the_probe_alone() -> None:
    b = healthy_board(gil={"contention_share": 0.8, "wait_mean_ms": 31.0})
    f = _one(_run(boards=(b,), threads=()), "gil-contention")
    assert f.claim == "GIL contention: threads wait for the GIL 80% of the time"
