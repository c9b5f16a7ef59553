"""The pipeline family (analysis/findings/pipeline.py): which stage limits throughput, and a queue backing up."""

from __future__ import annotations

from findings_builders import (
    _one,
    _run,
    pipeline,
)

from dflash_diag.model import Severity, ThreadState


def test_drafter_bottleneck_names_what_targets_do() -> None:
    pipe = pipeline(bottleneck="drafter", producer=0.62, consumer=0.0, trend=0.4,
                    target_shares={ThreadState.QUEUE_PUT: 0.62, ThreadState.NATIVE: 0.3},
                    drafter_shares={ThreadState.CHECKPOINT: 0.4, ThreadState.NATIVE: 0.5})
    f = _one(_run(pipe=pipe), "pipeline-bottleneck-drafter")
    assert f.severity == Severity.WARNING
    evidence = dict(f.evidence)
    assert evidence["target blocked in put"] == "62%"
    assert "queue put 62%" in evidence["target meanwhile"]
    assert "ckpt recompute 40%" in evidence["drafter states"]


def test_target_bottleneck_from_starvation_alone() -> None:
    pipe = pipeline(bottleneck="target", producer=0.0, consumer=0.3)
    f = _one(_run(pipe=pipe), "pipeline-bottleneck-target")
    assert f.severity == Severity.INFO  # 30% starved: worth naming, not alarming


def test_a_balanced_verdict_is_never_contradicted_by_a_stage_finding() -> None:
    """The verdict weighs the margin; the finding restates it: "balanced" beside "the consumer stage limits" would be
    one report contradicting itself (it did, on an oversubscribed box)."""
    for bottleneck in ("balanced", "unknown"):
        assert _run(pipe=pipeline(bottleneck=bottleneck, producer=0.3, consumer=0.22)) == ()


def test_balanced_pipeline_raises_nothing() -> None:
    assert _run(pipe=pipeline(bottleneck="drafter", producer=0.05, consumer=0.04, trend=0.0)) == ()


def test_queue_backing_up_alone_is_info() -> None:
    f = _one(_run(pipe=pipeline(bottleneck="drafter", producer=0.0, consumer=0.0, trend=0.5)),
             "pipeline-bottleneck-drafter")
    assert f.severity == Severity.INFO and "q_hs backing up (+0.50 items/s)" in f.claim
