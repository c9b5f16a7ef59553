"""Which (case, mode) runs of the casebook CI makes (`tests/casebook/test_casebook.py`), and their first pass.

They run in their module's fixture, after the rest of the suite: started beside it in a background thread, the
programs and the other tests slowed each other about threefold on 2 cores.
"""

from __future__ import annotations

import os

from cases import CASES, Case
from harness import MODES, Result, run_jobs

CPU_CASES = [c for c in CASES if not c.gpu]
GPU_CASES = [c for c in CASES if c.gpu]
GPU_RUN_ENV = "CASEBOOK_GPU"  # =1 on a CUDA machine: the casebook lane runs the GPU programs too


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



def gpu_jobs() -> list[tuple[Case, str]]:
    """Every (case, mode) of the GPU programs. The casebook lane lists them all, batch D's held-out third included,
    so a CPU run shows each one skipped and why, instead of leaving it out unseen (gpu_skip_reason)."""
    return [(c, m) for c in GPU_CASES for m in MODES if m in c.modes]


def gpu_skip_reason(case: Case, *, cuda: bool, run_env: str | None) -> str:
    """Why the casebook lane does not run this GPU program here ('' when it does). Without CUDA it cannot; with CUDA
    only when asked (``CASEBOOK_GPU=1``): the GPU batch is about 8 minutes of an H200, which `bench/casebook.py
    --gpu` phases (programs that read device-wide utilisation alone) and records, and a plain `make test` on the GPU
    machine should not spend it unasked."""
    where = ("held out: sealed until `bench/casebook.py --gpu --split held-out` scores it once on the GPU machine"
             if case.held_out else "`bench/casebook.py --gpu` scores it on the GPU machine")
    if not cuda:
        return f"needs CUDA: a GPU program ({where})"
    if run_env != "1":
        return f"a GPU program: set {GPU_RUN_ENV}=1 to run it in this lane ({where})"
    return ""
