"""The casebook's CI runs: which (case, mode) pairs `tests/casebook/test_casebook.py` and `test_jobs.py` run, and
their first pass (each test module then runs again each run that failed, before it counts).

Started in a background thread beside the rest of the suite, the programs and the rest slowed each other about
threefold on 2 cores, and attach's discovery deadlocked the test process (python/cpython#106883, now avoided in
probes/_common.py): they run in their own modules' fixtures, one module after the other.
"""

from __future__ import annotations

import os

from cases import CASES, JOB_CASES, Case
from harness import MODES, Result, run_case, run_jobs

CPU_CASES = [c for c in CASES if not c.gpu]
# (case, mode) of the jobs CI runs: the PID each gets is the case's ``targets[mode]``.
JOB_RUNS = (("ddp_straggler", "outside"), ("ddp_thread_died", "outside"), ("ddp_rank0_barrier", "probes"),
            ("ddp_healthy", "probes"))
JOBS_BY_NAME = {c.name: c for c in JOB_CASES}


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


def jobs_first_pass() -> dict[tuple[str, str], Result]:
    done: dict[tuple[str, str], Result] = {}
    for name, mode in JOB_RUNS:
        case = JOBS_BY_NAME[name]
        done[(name, mode)] = run_case(case, mode, target=case.targets[mode])
    return done


def first_pass(kind: str) -> dict[tuple[str, str], Result]:
    """Every CI run of ``kind`` ("casebook" or "jobs"), once."""
    return casebook_first_pass() if kind == "casebook" else jobs_first_pass()
