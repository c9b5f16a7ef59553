"""A finding: a named root cause with the numbers behind it and the fix."""

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


@dataclass(frozen=True, slots=True)
class Finding:
    rule_id: str  # stable, kebab-case, documented in docs/findings.md (e.g. "checkpoint-reentrant-no-grad")
    severity: Severity
    claim: str  # one line: what is wrong
    evidence: tuple[tuple[str, str], ...]  # (name, value-with-unit) pairs, the numbers behind the claim
    remedy: str  # what to do about it
    # Rough share of lost throughput this explains, 0..1, used to order findings of the same severity.
    impact: float = 0.0
