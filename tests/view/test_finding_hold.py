"""Live findings hold still: shown until absent for hold_s, and saying so while held."""

from __future__ import annotations

from dflash_diag.model import NA, Finding, Severity
from dflash_diag.model.findings import SYMPTOM
from dflash_diag.view.hold import FindingHold


def finding(rule: str, claim: str = "claim") -> Finding:
    return Finding(rule, Severity.WARNING, claim, (("x", "1"),), "fix")


def test_a_finding_that_flickers_stays_on_screen_and_says_when_it_was_seen() -> None:
    hold = FindingHold(hold_s=10.0)
    gil = finding("gil-contention", "GIL contention 34%")
    assert hold.update((gil,), 100.0) == (gil,)
    shown = hold.update((), 101.0)  # just under the threshold at the next refresh
    assert isinstance(shown, tuple) and [f.rule_id for f in shown] == ["gil-contention"]
    assert shown[0].claim == "GIL contention 34% (not seen in the last 1 s)"
    assert hold.update((), 110.0)[0].claim.endswith("(not seen in the last 10 s)")  # type: ignore[index]
    assert hold.update((), 110.5) == ()  # gone once absent for longer than hold_s
    again = finding("gil-contention", "GIL contention 40%")
    assert hold.update((again,), 111.0) == (again,)  # back: the current claim, unmarked


def test_several_findings_of_one_rule_and_na() -> None:
    hold = FindingHold(hold_s=5.0)
    a, b = finding("stale-code", "a.py changed"), finding("stale-code", "b.py changed")
    hold.update((a, b), 0.0)
    shown = hold.update((a,), 1.0)
    assert isinstance(shown, tuple) and [f.claim for f in shown] == ["a.py changed", "b.py changed (not seen in the last 1 s)"]
    na = NA("findings failed")
    assert hold.update(na, 2.0) is na


def test_a_verdict_about_the_other_stage_replaces_the_held_one() -> None:
    """A held "the producer stage limits throughput" beside a current "the consumer stage limits throughput" would
    contradict itself on one screen: the newer verdict replaces it; an unrelated held finding stays."""
    hold = FindingHold(hold_s=10.0)
    target = Finding("pipeline-bottleneck-target", Severity.INFO, "the producer stage limits throughput",
                     (("x", "1"),), "fix", kind=SYMPTOM, stages=("target",))
    drafter = Finding("pipeline-bottleneck-drafter", Severity.INFO, "the consumer stage limits throughput",
                      (("x", "1"),), "fix", kind=SYMPTOM, stages=("drafter",))
    gil = finding("gil-contention")
    hold.update((target, gil), 0.0)
    shown = hold.update((drafter,), 1.0)
    assert isinstance(shown, tuple) and [f.rule_id for f in shown] == ["pipeline-bottleneck-drafter", "gil-contention"]
    assert {f.rule_id for f in hold.update((), 2.0)} == {"pipeline-bottleneck-drafter", "gil-contention"}  # type: ignore[union-attr]
