"""The casebook's CI runs, and their first pass started when the session starts.

The casebook's programs spend most of their time waiting for their own ready lines and doctor's windows, and the
rest of the suite mostly runs one test process: run one after the other they took 6 of the suite's 15 minutes on
CI's 2 cores. ``tests/conftest.py`` therefore starts the first pass of every casebook and job run in a background
thread as soon as collection has picked them, and moves their tests to the end of the session; each module's
fixture then takes that pass (waiting for what is left of it), and runs again, in the foreground on a quieter box,
each run that failed. Without the early start (``CASEBOOK_EARLY=0``, or the tests run alone) the fixture runs the
first pass itself: the results are the same, only later.

One background thread runs the casebook and then the jobs (never both at once: a 4-rank job is 8 processes).
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future

from cases import CASES, JOB_CASES, Case
from harness import MODES, Result, run_case, run_jobs

CPU_CASES = [c for c in CASES if not c.gpu]
# (case, mode) of the jobs CI runs: the PID each gets is the case's ``targets[mode]``.
JOB_RUNS = (("ddp_straggler", "outside"), ("ddp_thread_died", "outside"), ("ddp_rank0_barrier", "probes"),
            ("ddp_healthy", "probes"))
JOBS_BY_NAME = {c.name: c for c in JOB_CASES}


def parallel() -> int:
    return int(os.environ.get("CASEBOOK_PARALLEL", "3"))


def casebook_jobs() -> list[tuple[Case, str]]:
    return [(c, m) for c in CPU_CASES for m in MODES if m in c.modes]


def casebook_first_pass() -> dict[tuple[str, str], Result]:
    return {(r.case, r.mode): r for r in run_jobs(casebook_jobs(), parallel=parallel())}


def jobs_first_pass() -> dict[tuple[str, str], Result]:
    done: dict[tuple[str, str], Result] = {}
    for name, mode in JOB_RUNS:
        case = JOBS_BY_NAME[name]
        done[(name, mode)] = run_case(case, mode, target=case.targets[mode])
    return done


_started: dict[str, Future[dict[tuple[str, str], Result]]] = {}


def start_early(kinds: set[str]) -> None:
    """Start the first pass of ``kinds`` ("casebook", "jobs") in one background thread, in that order."""
    if os.environ.get("CASEBOOK_EARLY", "1") == "0" or not kinds or _started:
        return
    order = [(k, f) for k, f in (("casebook", casebook_first_pass), ("jobs", jobs_first_pass)) if k in kinds]
    for kind, _ in order:
        _started[kind] = Future()

    def body() -> None:
        for kind, first_pass in order:
            future = _started[kind]
            try:
                future.set_result(first_pass())
            except BaseException as exc:  # the fixture raises it in its test
                future.set_exception(exc)

    threading.Thread(target=body, name="casebook-early", daemon=True).start()


def first_pass(kind: str) -> dict[tuple[str, str], Result]:
    """The first pass of ``kind``: the early one (waiting for what is left of it), else run now."""
    future = _started.get(kind)
    if future is not None:
        return future.result()
    return casebook_first_pass() if kind == "casebook" else jobs_first_pass()
