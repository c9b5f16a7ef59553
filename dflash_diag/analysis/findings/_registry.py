"""What each rule is, declared next to its check: one place the causal model and the docs test read.

Every rule family module has ``RULES: tuple[RuleSpec, ...]`` beside its ``check``. A finding whose rule id its
family did not declare, or of another kind than declared, is not trusted: ``evaluate`` reports it as a
``rule-error`` note (and a test fails). ``analysis.causal`` derives from the declarations which findings are
read off samples, which causes do not slow anything, which symptoms are hangs and what a root cause produces.
"""

from __future__ import annotations

from dataclasses import dataclass

from dflash_diag.model.findings import CAUSE, KINDS


@dataclass(frozen=True, slots=True)
class RuleSpec:
    id: str  # kebab-case, documented in docs/findings.md
    kind: str = CAUSE  # model.findings.KINDS
    # Read off the stack samples (shares, waits): meaningless while the process cannot run (dropped then).
    sampled: bool = False
    # A cause that slows something (the "because" of a slow stage); False: it is wrong, not slow.
    slows: bool = True
    # A symptom that names which stage limits throughput: held back in warm-up and when the process hangs.
    stage_verdict: bool = False
    # A symptom that says the process does not move at all: only the causes that declare it in
    # ``explains`` explain it, and stage verdicts are held back beside it.
    hang: bool = False
    # The process does not move: stage verdicts are held back beside it and the phase is "hung".
    halts: bool = False
    # Symptoms this cause explains even though they are hangs (a dead thread explains a hung pipeline) or plain
    # statements of where time goes (on the root's stage: a changed value on the hot line of the root or its CPU's
    # taker).
    explains: tuple[str, ...] = ()
    # Causes this one produces: named first, leading where they would (empty_cache() -> allocator churn).
    produces: tuple[str, ...] = ()
    # The process cannot run at all (stopped, zombie): every sampled finding is dropped beside it.
    cannot_run: bool = False
    # A plain statement of where time goes, for when no rule names a cause: no cause is linked to it.
    unlinked: bool = False
    # Symptoms this one says better: held back when this one is found (the wait chain over a stage verdict).
    supersedes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"rule {self.id}: unknown kind {self.kind!r}")
