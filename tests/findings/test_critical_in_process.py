"""The in-process critical check (dflash_contract.readings.critical_alerts, raised as wandb alerts) and the full rule set
agree: on the same board, the probes alert exactly for the critical findings that need only the board."""

from __future__ import annotations

from typing import Any

import pytest
from findings_builders import HEALTHY_PROBES, board, observation, pipeline

from dflash_contract.readings import critical_alerts
from dflash_diag.analysis.findings import evaluate
from dflash_diag.model import Severity

CHECKPOINT = HEALTHY_PROBES["checkpoint"]
CASES: dict[str, dict[str, Any]] = {
    "healthy": {},
    "reentrant, grads lost": {"calls": {"reentrant": 96, "non_reentrant": 0}, "grad_none_count": 24,
                              "grad_none_params": ["drafter.layers.0.q_proj.weight"]},
    "non-reentrant, grads lost": {"grad_none_count": 1, "grad_none_params": ["drafter.fc.weight"]},
    "names only": {"grad_none_count": None, "grad_none_params": ["a.weight", "a.bias"]},
    "reentrant, grads fine": {"calls": {"reentrant": 96, "non_reentrant": 0}},
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_in_process_alerts_match_the_critical_findings(case: str) -> None:
    probes = {name: dict(payload) for name, payload in HEALTHY_PROBES.items()}
    probes["checkpoint"] = {**CHECKPOINT, **CASES[case]}
    b = board(probes, {})
    findings = evaluate(observation([b]), (), pipeline(), now_wall_s=b.wall_time_s)
    critical = sorted(f.rule_id for f in findings if f.severity == Severity.CRITICAL)
    alerts = sorted(a.rule_id for a in critical_alerts(b.probes))
    assert alerts == critical


def test_every_critical_rule_reading_only_the_board_is_mirrored() -> None:
    """A new critical rule must be added to dflash_contract.readings.critical_alerts (or shown to need more than a board)."""
    import inspect

    import dflash_contract.readings as readings_module
    import dflash_diag.analysis.findings as findings_pkg

    # Critical rules that need more than the board, and so cannot be checked in process: a stopped, zombie or
    # stuck process cannot report on itself (/proc, read from outside); a hang is judged from every thread's
    # stacks and the process's CPU time over the window, and so are deadlocks and stalls (the wait-for graph); a
    # job's rules compare every rank (one rank's board cannot see its peers; crossnode: every rank's posts).
    needs_more = {"process", "hang", "waits", "job", "crossnode"}
    counts = {name: inspect.getsource(m).count("Severity.CRITICAL")
              for name, m in inspect.getmembers(findings_pkg, inspect.ismodule) if name not in needs_more}
    # health's critical verdicts are judged by dflash_contract.health.judge, which critical_alerts calls too.
    assert counts.get("health") == 1 and "judge(" in inspect.getsource(readings_module.critical_alerts)
    counts.pop("health")
    assert sum(counts.values()) == 1 and counts.get("checkpoint") == 1, \
        "a new critical rule: mirror it in dflash_contract/readings.py"
