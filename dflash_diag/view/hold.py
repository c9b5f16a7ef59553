"""Findings that hold still on a live screen.

``top`` re-evaluates every rule at each refresh; a finding near its threshold would appear and vanish from one
second to the next. A finding, once shown, stays until it has been absent for ``hold_s`` seconds, and while it is
held it says so ("not seen in the last 4 s"), so the screen never claims more than was seen. ``--batch`` and
``doctor`` judge one window once and do not need this.
"""

from __future__ import annotations

from dataclasses import replace

from dflash_diag.model import NA, Finding, Maybe
from dflash_diag.model.findings import SYMPTOM


class FindingHold:
    def __init__(self, hold_s: float) -> None:
        self.hold_s = hold_s
        self._last: dict[tuple[str, int], tuple[Finding, float]] = {}

    def update(self, findings: Maybe[tuple[Finding, ...]], now_s: float) -> Maybe[tuple[Finding, ...]]:
        """What to show at ``now_s``: the findings raised now, then those raised within the last ``hold_s``."""
        if isinstance(findings, NA):
            return findings
        current: dict[tuple[str, int], Finding] = {}
        for f in findings:  # a rule may raise several findings: the n-th of a rule keeps its slot
            current[(f.rule_id, sum(1 for k in current if k[0] == f.rule_id))] = f
        for key, f in current.items():
            self._last[key] = (f, now_s)
        held: list[Finding] = []
        for key, (f, seen_s) in list(self._last.items()):
            if key in current:
                continue
            if any(_rivals(f, now) for now in current.values()):
                del self._last[key]  # the newer verdict about another stage replaces it: never both on one screen
                continue
            if now_s - seen_s > self.hold_s:
                del self._last[key]
                continue
            held.append(replace(f, claim=f"{f.claim} (not seen in the last {now_s - seen_s:.0f} s)"))
        return tuple(findings) + tuple(held)


def _rivals(held: Finding, current: Finding) -> bool:
    """Two verdicts of one rule about different stages (``pipeline-bottleneck-target`` and ``-drafter``): the
    screen shows the current one only, so one report never says both stages limit throughput."""
    return (held.kind == current.kind == SYMPTOM and held.rule_id != current.rule_id
            and held.rule_id.rsplit("-", 1)[0] == current.rule_id.rsplit("-", 1)[0]
            and bool(held.stages) and bool(current.stages) and set(held.stages) != set(current.stages))
