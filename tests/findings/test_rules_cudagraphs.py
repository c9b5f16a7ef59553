"""The CUDA-graph family (analysis/findings/cudagraphs.py): skips, re-records, captures from several threads."""

from __future__ import annotations

from findings_builders import (
    HEALTHY_APP,
    HEALTHY_PROBES,
    NOW_S,
    _one,
    _run,
    board,
    healthy_board,
)

from dflash_diag.model import Severity


def test_cudagraph_skipped_with_reason() -> None:
    b = healthy_board(cudagraphs={"skips": 1, "skip_reasons": ["skipping cudagraphs due to mutated inputs (1 instances)"]})
    f = _one(_run(boards=(b,)), "cudagraph-skipped")
    assert f.severity == Severity.INFO and "mutated inputs" in f.claim  # could be faster: cost not measured


def test_cudagraph_rerecorded_every_step() -> None:
    first = board({**HEALTHY_PROBES, "cudagraphs": {**HEALTHY_PROBES["cudagraphs"], "rerecords": 10}},
                  {**HEALTHY_APP, "step": 100})
    last = board({**HEALTHY_PROBES, "cudagraphs": {**HEALTHY_PROBES["cudagraphs"], "rerecords": 14}},
                 {**HEALTHY_APP, "step": 104}, wall_time_s=NOW_S + 2)
    f = _one(_run(boards=(first, last), now=NOW_S + 2), "cudagraph-rerecord")
    assert dict(f.evidence)["re-records per step"] == "1.00"


def test_cudagraph_capture_from_several_threads_on_old_torch() -> None:
    b = healthy_board(cudagraphs={"torch": "2.11.0", "capture_threads": ["drafter-0", "drafter-1"]})
    assert _one(_run(boards=(b,)), "cudagraph-multi-thread").severity == Severity.WARNING


def test_cudagraph_capture_from_several_threads_is_fine_on_2_13() -> None:
    b = healthy_board(cudagraphs={"torch": "2.13.0", "capture_threads": ["drafter-0", "drafter-1"]})
    assert _run(boards=(b,)) == ()
