"""`cpu-threads-capped`, from real recordings (tests/casebook/observations: `threads_capped_regressor`, whose
launcher profile writes OMP_NUM_THREADS=1 and MKL_NUM_THREADS=1 before torch loads, 9.5 against its twin's 14.6
steps/s on the quiet 2-core box, and the twin at torch's default). Information, never a warning: a program kept to
one thread on purpose looks the same; the stage verdict says it beside the time."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from dflash_diag.analysis import analyse
from dflash_diag.model import Observation, Severity
from dflash_diag.snapshot.bundle import load_observation

RECORDED = Path(__file__).resolve().parents[1] / "casebook" / "observations"
SAID = "OMP_NUM_THREADS=1 (environment, set by the program) holds torch's ops to 1 thread while "


def _obs(name: str) -> Observation:
    obs = load_observation(str(RECORDED / f"{name}.json.gz"))
    assert isinstance(obs, Observation)
    return obs


@pytest.mark.parametrize("mode", ["outside", "probes", "attach"])
def test_a_cap_below_the_idle_cpus_is_said_beside_the_time_and_whole(mode: str) -> None:
    report = analyse(_obs(f"threads_capped_regressor__{mode}"))
    (found,) = [f for f in report.findings if f.rule_id == "cpu-threads-capped"]
    assert found.severity == Severity.INFO and found.impact == 0.0
    assert found.claim.startswith(SAID) and "MainThread spends about " in found.claim
    assert "no native pool thread ran beside it" in found.claim and "could save up to about " in found.claim
    assert report.headline is not None and SAID in report.headline.text
    assert not [f for f in report.findings if f.severity >= Severity.WARNING]


@pytest.mark.parametrize("mode", ["outside", "probes", "attach"])
def test_the_twin_at_the_default_pool_is_quiet(mode: str) -> None:
    report = analyse(_obs(f"threads_capped_regressor_fixed__{mode}"))
    assert not [f for f in report.findings if f.rule_id == "cpu-threads-capped"]
    assert report.headline is not None and "holds torch's ops" not in report.headline.text


def test_nothing_is_said_where_other_tasks_want_the_idle_cpu() -> None:
    """The same window, with the machine's runnable count two higher at every sweep: the CPU the process leaves is
    one other tasks want, and a wider pool would only compete for it."""
    obs = _obs("threads_capped_regressor__outside")
    busy = replace(obs, sched=tuple(replace(s, procs_running=(s.procs_running or 0) + 2) for s in obs.sched))
    report = analyse(busy)
    assert not [f for f in report.findings if f.rule_id == "cpu-threads-capped"]
    assert report.headline is not None and "holds torch's ops" not in report.headline.text


def test_a_cap_in_a_childs_environment_is_not_the_process_s() -> None:
    obs = _obs("threads_capped_regressor__outside")
    facts = obs.os_facts
    assert facts is not None and isinstance(facts.env, tuple)
    children_only = replace(facts, env=tuple(replace(e, where="children (1)") for e in facts.env))
    report = analyse(replace(obs, os_facts=children_only))
    assert not [f for f in report.findings if f.rule_id == "cpu-threads-capped"]
