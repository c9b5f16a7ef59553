"""`malloc-debug` where the variable is in a child's environment only, on a real recording
(tests/casebook/observations: batch 26's malloc program, whose decoder child gets MALLOC_PERTURB_, and its twin)."""
from __future__ import annotations

import gzip
from pathlib import Path

from dflash_diag.analysis import analyse
from dflash_diag.model import Observation, Severity
from dflash_diag.observe.codec import read_observation

RECORDED = Path(__file__).resolve().parents[1] / "casebook" / "observations"


def _obs(name: str) -> Observation:
    obs = read_observation(gzip.open(RECORDED / f"{name}.json.gz").read())
    assert isinstance(obs, Observation)
    return obs


def test_an_allocator_debug_variable_in_a_childs_environment_is_weighed_by_the_childs_time_in_the_allocator() -> None:
    # Batch 26's malloc program: MALLOC_PERTURB_ is set for the decoder child only. Its cost is the child's native
    # samples in malloc and free, and it is the reason the frame reader waits on the child: named before the wait.
    # The trainer's own ops allocate without it and are not said to.
    report = analyse(_obs("settings26_bittern__outside"))
    assert report.headline is not None and report.headline.because[:2] == ("malloc-debug", "process-wait")
    found = next(f for f in report.findings if f.rule_id == "malloc-debug")
    assert found.severity is Severity.WARNING
    assert "MALLOC_PERTURB_=165 (environment of its children (1))" in found.claim
    assert "a child the process waits on, spends 73% of its native samples in the allocator's calls" in found.claim
    assert "MainThread" not in found.claim and found.stages == ("target",)
    twin = analyse(_obs("settings26_bittern_fixed__outside"))
    assert "malloc-debug" not in {f.rule_id for f in twin.findings}
