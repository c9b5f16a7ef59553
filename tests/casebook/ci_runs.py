"""Which (case, mode) runs of the casebook CI makes (`tests/casebook/test_casebook.py`), and their first pass.

They run in their module's fixture, after the rest of the suite: started beside it in a background thread, the
programs and the other tests slowed each other about threefold on 2 cores.
"""

from __future__ import annotations

import os

from cases import CASES, Case
from harness import MODES, Result, run_jobs

CPU_CASES = [c for c in CASES if not c.gpu]


def parallel() -> int:
    return int(os.environ.get("CASEBOOK_PARALLEL", "3"))


# Families CI runs in every mode they list: a stall read as healthy in one mode is the worst miss there is.
EVERY_MODE_FAMILIES = frozenset({"hang", "deadlock"})


def casebook_jobs() -> list[tuple[Case, str]]:
    """The (case, mode) runs of CI: hangs and deadlocks in every mode they list, every other case in one of its modes,
    taken in turn down the list (outside, probes, attach: each mode keeps about its share of the cases).

    Every mode of every case is 107 runs, about 7.5 minutes of CPU-bound programs on CI's 2 cores (half the suite's
    budget); ``bench/casebook.py`` runs them all (docs/benchmarks.md has the table), CI about 60."""
    out: list[tuple[Case, str]] = []
    turn = 0
    for case in CPU_CASES:
        modes = [m for m in MODES if m in case.modes]
        if case.family in EVERY_MODE_FAMILIES:
            out.extend((case, m) for m in modes)
        else:
            out.append((case, modes[turn % len(modes)]))
            turn += 1
    return out


def casebook_first_pass() -> dict[tuple[str, str], Result]:
    return {(r.case, r.mode): r for r in run_jobs(casebook_jobs(), parallel=parallel())}

