"""A finding: a named symptom or root cause with the numbers behind it and the fix; and the analysis that
links causes to the symptoms they explain and names one headline."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class Severity(IntEnum):
    INFO = 1
    WARNING = 2
    CRITICAL = 3

    @property
    def label(self) -> str:
        return self.name.lower()


# What a finding is in the causal model (docs/findings.md, "The causal model").
SYMPTOM = "symptom"  # what the user sees: a stage limits throughput, the GPU idles, the pipeline hangs
CAUSE = "cause"  # why: a recompile storm, a GIL hog, host syncs, a dead consumer thread
STATE = "state"  # what the process is doing as a whole: stopped, zombie, warming up, exited
NOTE = "note"  # about the diagnosis itself: no probes, a rule that could not read its input
KINDS = (SYMPTOM, CAUSE, STATE, NOTE)


@dataclass(frozen=True, slots=True)
class Finding:
    rule_id: str  # stable, kebab-case, documented in docs/findings.md (e.g. "checkpoint-grad-none")
    severity: Severity
    claim: str  # one line: what is wrong
    evidence: tuple[tuple[str, str], ...]  # (name, value-with-unit) pairs, the numbers behind the claim
    remedy: str  # what to do about it
    # Rough share of lost throughput this explains, 0..1, used to order findings of the same severity.
    impact: float = 0.0
    kind: str = CAUSE
    # Symptoms: the pipeline stages they are about. Causes: the stages they slow (``model.stage.Stage`` values);
    # empty for a cause that acts on the whole process (a GIL hog, stale code).
    stages: tuple[str, ...] = ()
    # Set by the linking pass (analysis.causal): on a symptom, the rule ids of the causes that explain it, best
    # first; on a cause, the rule ids of the symptoms it explains.
    because: tuple[str, ...] = ()
    explains: tuple[str, ...] = ()
    # Kernel TIDs whose time this claim leaves at a program line that calls into C code the Python stacks cannot
    # see (a GIL holder at `np.random.choice(...)`): a native look would say what that code runs (analysis.native).
    looks_below: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Headline:
    """The one sentence a user reads first: the symptom with its cause, or the most important cause."""

    rule_id: str  # the finding it leads with (a symptom, or a cause/state when there is no symptom)
    severity: Severity
    text: str
    remedy: str
    because: tuple[str, ...] = ()  # the causes it names


def healthy(findings: tuple[Finding, ...]) -> bool:
    """No finding at warning level or above: what ``healthy`` means for a process's analysis and a job's alike."""
    return all(f.severity < Severity.WARNING for f in findings)
