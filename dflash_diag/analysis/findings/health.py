"""Training health from the ``health`` probe: a run that trains nothing, or trains on NaN, while it looks busy.

The judgement is ``dflash_contract.health.judge`` (one logic: the program's own alerts use it too). Without the
probe, a process whose stacks run a backward gets a note: its training health was not checked, and how to check it
without a restart.
"""

from __future__ import annotations

from collections.abc import Iterator

from dflash_contract.board import ProbeName
from dflash_contract.health import judge
from dflash_diag.analysis.findings._context import Context
from dflash_diag.analysis.findings._registry import RuleSpec
from dflash_diag.model import Finding, Severity
from dflash_diag.model.findings import NOTE

RULES = (
    RuleSpec("training-nonfinite", slows=False),
    RuleSpec("training-no-update", slows=False),
    RuleSpec("training-lr-zero", slows=False),
    RuleSpec("training-health-unchecked", kind=NOTE, slows=False),
)


def check(ctx: Context) -> Iterator[Finding]:
    payload = ctx.probe(ProbeName.HEALTH)
    if payload is None:
        if ctx.waits.trains:
            pid = ctx.obs.pid
            yield Finding(
                rule_id="training-health-unchecked", severity=Severity.INFO, kind=NOTE,
                claim="training health was not checked: the process trains (backward in its stacks) without the "
                      "health probe, so a loss gone NaN or weights that never change would not show",
                evidence=(("training threads", ", ".join(ctx.waits.trains)),),
                remedy=f"`dflash-diag attach {pid} --probes health` checks it without a restart (or run the program "
                       "under `dflash-diag run`, where it is on).")
        return
    for verdict in judge(payload, ctx.now_wall_s):
        yield Finding(rule_id=verdict.rule_id, severity=Severity.CRITICAL if verdict.critical else Severity.WARNING,
                      claim=verdict.claim, evidence=verdict.evidence, remedy=verdict.remedy,
                      impact=1.0 if verdict.critical else 0.5)
