"""Which thread names belong to which pipeline stage: the ``--target-pattern`` / ``--drafter-pattern`` globs.

Part of what an :class:`~dflash_diag.model.Observation` records (the analysis reads its stages from them), so a
replayed observation is judged with the patterns of the run that took it. Standard library only.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from dflash_diag.model.stage import Stage


@dataclass(frozen=True, slots=True)
class StagePatterns:
    """Which thread names belong to which pipeline stage (fnmatch patterns, case-sensitive)."""

    target: tuple[str, ...] = ("target-*",)
    drafter: tuple[str, ...] = ("drafter-*",)

    def stage_of(self, name: str | None) -> Stage:
        if name:
            if any(fnmatch.fnmatchcase(name, p) for p in self.target):
                return Stage.TARGET
            if any(fnmatch.fnmatchcase(name, p) for p in self.drafter):
                return Stage.DRAFTER
        return Stage.OTHER

    @classmethod
    def parse(cls, target: str | None = None, drafter: str | None = None) -> StagePatterns:
        """From comma-separated CLI values (``--target-threads 'target-*,tgt*'``); None keeps the default."""
        default = cls()
        return cls(
            target=_split(target) or default.target,
            drafter=_split(drafter) or default.drafter,
        )


def _split(value: str | None) -> tuple[str, ...]:
    return tuple(p.strip() for p in (value or "").split(",") if p.strip())
