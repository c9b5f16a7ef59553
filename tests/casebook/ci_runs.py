"""Which (case, mode) runs of the casebook CI makes live (`tests/casebook/test_casebook.py`), and their first pass.
Every (case, mode) is also replayed from its recorded observation (`tests/casebook/test_casebook_replay.py`): cheap, so CI
replays all of them and runs live only what keeps the live path honest.

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


# What CI runs live, beside the replay of every recorded (case, mode) (test_casebook_replay.py): enough that a regression in the
# live observing path (py-spy, /proc, the board, `dflash-diag run`, `dflash-diag attach`, doctor's window) fails CI.
# Every hang and deadlock program (a stall read as healthy is the worst miss there is), in turn outside and under
# probes, the first one in both; the programs the time-to-name test times; one attach; one healthy program.
LIVE_RUNS: tuple[tuple[str, str], ...] = (
    ("hang_dead_consumers", "outside"), ("hang_dead_consumers", "probes"),
    ("deadlock_two_locks", "outside"), ("deadlock_condition", "probes"),
    ("hang_report_consistency", "outside"), ("fork_held_lock", "probes"), ("prefetch_join_hang", "outside"),
    ("gil_hog_side_thread", "outside"), ("warmup_compile", "probes"),
    ("slow_worker_thread", "attach"), ("healthy_pipeline", "outside"),
)
# Families whose every program is live (cursor_lock_queue, a known miss in both its modes, is replayed only).
LIVE_FAMILIES = frozenset({"hang", "deadlock"})
ALL_ENV = "CASEBOOK_ALL"  # set (make casebook): every CPU case in every mode it lists, live


def casebook_jobs() -> list[tuple[Case, str]]:
    """The (case, mode) runs made live: CI's small honest subset (``LIVE_RUNS``), or with ``CASEBOOK_ALL=1`` every
    mode of every CPU case (178 runs: ``make casebook``; what they cost is in docs/benchmarks.md)."""
    if os.environ.get(ALL_ENV, "") not in ("", "0"):
        return [(c, m) for c in CPU_CASES for m in MODES if m in c.modes]
    by_name = {c.name: c for c in CPU_CASES}
    return [(by_name[name], mode) for name, mode in LIVE_RUNS]


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
    where = ("held out: scored once on the H200 by `bench/casebook.py --gpu --split held-out` (2026-12-05, "
             "docs/benchmarks.md); its recording is replayed (test_casebook_replay.py)"
             if case.held_out else "`bench/casebook.py --gpu` scores it on the GPU machine")
    if not cuda:
        return f"needs CUDA: a GPU program ({where})"
    if run_env != "1":
        return f"a GPU program: set {GPU_RUN_ENV}=1 to run it in this lane ({where})"
    return ""
