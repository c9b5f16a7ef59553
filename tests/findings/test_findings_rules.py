"""The rules as a whole: a healthy run raises nothing, findings sort by severity then impact, odd payloads never
raise, every rule id is registered and documented. Each rule family's own cases: test_rules_<family>.py."""

from __future__ import annotations

from typing import Any

import pytest
from findings_builders import (
    _ids,
    _run,
    healthy_board,
)

from dflash_diag.analysis.findings import RULE_IDS
from dflash_diag.model import NA, Severity
from dflash_diag.model.findings import healthy


def test_healthy_run_raises_nothing() -> None:
    assert _run() == ()


def test_no_board_is_info_only() -> None:
    findings = _run(boards=NA("no board published"))
    assert _ids(findings) == {"no-probes"}
    assert healthy(findings)


def test_sorted_most_severe_then_impact() -> None:
    b = healthy_board(checkpoint={"grad_none_count": 3}, codedrift={"stale": [{"module": "m", "file": "/m.py"}]},
                      gil={"contention_share": 0.9})
    findings = _run(boards=(b,))
    severities = [int(f.severity) for f in findings]
    assert severities == sorted(severities, reverse=True)
    warnings = [f for f in findings if f.severity == Severity.WARNING]
    assert [f.rule_id for f in warnings] == ["gil-contention", "stale-code"]  # impact 0.9 before 0.2


@pytest.mark.parametrize("garbage", [{"stale": "nope"}, {"stale": [1, None, {"module": 3}]}, {"checked_modules": "x"}])
def test_odd_payloads_never_raise(garbage: dict[str, Any]) -> None:
    b = healthy_board(codedrift=garbage, checkpoint={"calls": "x", "grad_none_count": float("nan")},
                      allocator={"devices": {"0": "bad"}}, compile={"recent_recompiles": [None, "x"], "recompiles": 50})
    findings = _run(boards=(b,))
    assert "rule-error" not in _ids(findings)


def test_every_raised_rule_id_is_registered() -> None:
    assert {"compile-recompile-storm"} <= set(RULE_IDS)


def test_every_rule_is_documented() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "findings.md").read_text()
    missing = [rule for rule in RULE_IDS if f"`{rule}`" not in doc]
    assert missing == []


def test_every_trainer_scenario_is_documented() -> None:
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    tree = ast.parse((root / "reference_trainer" / "scenarios.py").read_text())
    names = next(
        [k.value for k in node.value.keys if isinstance(k, ast.Constant)]
        for node in ast.walk(tree)
        if isinstance(node, ast.AnnAssign | ast.Assign) and "SCENARIOS" in ast.unparse(node).split("=")[0]
        and isinstance(node.value, ast.Dict)
    )
    doc = (root / "docs" / "scenarios.md").read_text()
    assert names and [n for n in names if f"## `{n}`" not in doc] == []
