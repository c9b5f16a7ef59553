"""When a board no longer describes its process: one rule for ``board``, ``doctor`` and ``top``."""

from __future__ import annotations

from typing import Final

# The writer's timer publishes every interval_s (1 s) whether or not the program steps; ten missed publishes
# (and at least 10 s) means its threads no longer run: stopped, hung with the GIL held, or swapped out.
STALE_INTERVALS: Final = 10
STALE_MIN_S: Final = 10.0
# A board that is fresh while steps stopped this long: the program is alive but its loop is stuck.
NO_STEP_STALL_S: Final = 60.0


def stale_after_s(interval_s: float) -> float:
    """Age (s) past which a board no longer describes the process."""
    return max(STALE_MIN_S, STALE_INTERVALS * interval_s)


def is_stale(age_s: float, interval_s: float) -> bool:
    return age_s > stale_after_s(interval_s)
