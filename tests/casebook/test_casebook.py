"""The casebook live: the programs run, doctor attaches, its planted cause is named (and the right headline), a healthy
program gets no warning, and the headline comes from one 5 s window, warm-up included (the 10 s time-to-name goal is
bench/casebook.py's, measured on an idle box). CI runs a small subset live (ci_runs.LIVE_RUNS: every hang and
deadlock program, in turn attached from outside and under `dflash-diag run`, one attached with `dflash-diag attach`,
the timed programs, a healthy one) and replays every (case, mode) from its recorded observation (test_casebook_replay.py);
`make casebook` (``CASEBOOK_ALL=1``) and `bench/casebook.py` run every mode of every program live. The GPU programs
are listed too, each (case, mode) a test that skips without CUDA saying why (the held-out ones: scored
once on the H200, their recordings replayed), and runs on a CUDA machine with ``CASEBOOK_GPU=1``.

All (case, mode) runs happen once, a few at a time (``CASEBOOK_PARALLEL``, default 3), in a module fixture
(ci_runs.py); each test then checks one result. A run whose program did not reach its ready state in time, or whose answer
missed, is run once more before it counts as a failure: on two shared cores a program can be starved of CPU
for seconds, and that is the machine, not the diagnosis (the table from ``bench/casebook.py`` shows first tries).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cases import CASES, Case
from ci_runs import (
    CPU_CASES,
    GPU_RUN_ENV,
    casebook_first_pass,
    casebook_jobs,
    gpu_jobs,
    gpu_skip_reason,
    parallel,
)
from harness import TIME_TO_NAME_S, Result, assert_diagnosed, run_case_modes, run_jobs, score, starts_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
# The 10 s goal is measured by bench/casebook.py, which fails a run that answers slower (the box to itself).
# Here 3 programs and doctor's 20 Hz burst share 2 cores with whatever else the CI box runs (a run with one
# extra busy process took 11.2 s), so CI checks what load cannot explain away: the answer came from its one 5 s
# window, not from waiting for the warm-up or the program to end.
CI_ANSWER_BOUND_S = 3 * TIME_TO_NAME_S


@pytest.fixture(scope="module")
def results() -> dict[tuple[str, str], Result]:
    done = casebook_first_pass()
    by_name = {c.name: c for c in CPU_CASES}
    # A known miss (an expected failure) is not run again: a second try cannot make it count.
    again = [key for key, result in done.items() if not result.ok and key[1] not in by_name[key[0]].known_miss]
    for result in run_jobs([(by_name[name], mode) for name, mode in again], parallel=parallel()):
        done[(result.case, result.mode)] = result
    return done


def _ids() -> list[str]:
    return [f"{c.name}-{m}" for c, m in casebook_jobs()]


def _params() -> list[object]:
    """Every (case, mode); a known miss (docs/benchmarks.md says why) runs as a non-strict expected failure."""
    return [pytest.param(c, m, marks=pytest.mark.xfail(strict=False, reason=c.known_miss[m]))
            if m in c.known_miss else pytest.param(c, m) for c, m in casebook_jobs()]


@pytest.mark.parametrize(("case", "mode"), _params(), ids=_ids())
def test_case(results: dict[tuple[str, str], Result], case: Case, mode: str) -> None:
    assert_diagnosed(case, results[(case.name, mode)])


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _gpu_params() -> list[object]:
    """Every (GPU case, mode): skipped without CUDA (or with it, unless CASEBOOK_GPU=1) saying why; a known miss
    runs as a non-strict expected failure, as on the CPU."""
    cuda, run_env = _cuda(), os.environ.get(GPU_RUN_ENV)
    params: list[object] = []
    for case, mode in gpu_jobs():
        marks: list[pytest.MarkDecorator] = [pytest.mark.gpu]
        why = gpu_skip_reason(case, cuda=cuda, run_env=run_env)
        if why:
            marks.append(pytest.mark.skip(reason=why))
        elif mode in case.known_miss:
            marks.append(pytest.mark.xfail(strict=False, reason=case.known_miss[mode]))
        params.append(pytest.param(case, mode, marks=marks, id=f"{case.name}-{mode}"))
    return params


@pytest.fixture(scope="module")
def gpu_results() -> dict[tuple[str, str], Result]:
    return {}  # filled one start at a time: outside and attach share the plain start (harness.run_case_modes)


@pytest.mark.parametrize(("case", "mode"), _gpu_params())
def test_gpu_case(gpu_results: dict[tuple[str, str], Result], case: Case, mode: str) -> None:
    if (case.name, mode) not in gpu_results:
        start = next(ms for ms in starts_for(case, case.modes) if mode in ms)
        for r in run_case_modes(case, start, extra_args=("--device", "cuda")):
            gpu_results[(r.case, r.mode)] = r
    assert_diagnosed(case, gpu_results[(case.name, mode)])


@pytest.mark.parametrize("name", ["warmup_compile", "hang_dead_consumers", "gil_hog_side_thread"])
def test_time_to_name(results: dict[tuple[str, str], Result], name: str) -> None:
    """A headline from one default 5 s window (warm-up included), within CI_ANSWER_BOUND_S on a shared box."""
    case = next(c for c in CPU_CASES if c.name == name)
    for mode in (m for c, m in casebook_jobs() if c is case):
        r = results[(name, mode)]
        assert not r.error and r.headline_rule is not None
        assert r.seconds_to_answer < CI_ANSWER_BOUND_S, (mode, r.seconds_to_answer)


def test_casebook_covers_the_five_misses_and_enough_programs() -> None:
    misses = {c.miss.split(":")[0] for c in CASES if c.miss[:1].isdigit()}
    assert misses == {"1", "2", "3", "4", "5"}
    assert sum(1 for c in CASES if not c.healthy) >= 12
    assert sum(1 for c in CASES if c.healthy) >= 3
    programs = Path(__file__).resolve().parent / "programs"
    for c in CASES:  # standalone: never our trainer, never this package
        for path in (programs / c.program).rglob("*.py"):
            text = path.read_text()
            assert "reference_trainer" not in text and "dflash_diag" not in text and "import probes" not in text, path


def test_a_forbidden_rule_fails_a_case_whose_headline_is_right() -> None:
    """A hang whose report also calls a stage the bottleneck is a wrong answer (hang_report_consistency)."""
    case = next(c for c in CASES if c.name == "hang_report_consistency")
    headline = {"rule_id": "pipeline-hang", "because": [], "text": "learner blocked in _await_release (x.py:28)"}
    hang = {"rule_id": "pipeline-hang", "severity": "critical"}
    also_slow = {"rule_id": "pipeline-bottleneck-target", "severity": "info"}
    clean = score(case, "outside", {"findings": [hang], "headline": headline}, 1.0)
    mixed = score(case, "outside", {"findings": [hang, also_slow], "headline": headline}, 1.0)
    assert clean.ok and clean.unwanted == ()
    assert mixed.headline_ok and not mixed.ok and mixed.unwanted == ("pipeline-bottleneck-target",)


def test_the_health_cases_cover_the_silent_forms_in_both_modes() -> None:
    """Issue 18: each silent no-training form, and each healthy pattern that must not be called one, has a program
    that runs under `dflash-diag run` and attached once running."""
    health = [c for c in CASES if c.family in ("health", "healthy (health)")]
    assert all({"probes", "attach"} <= set(c.modes) and set(c.expect) >= set(c.modes) for c in health)
    forms = {t for c in health if not c.healthy for t in c.tags}
    assert forms >= {"stale-copy", "detached-graph", "requires-grad-lost", "zero-grad", "nan", "lr-zero", "reentrant"}
    healthy = {t for c in health if c.healthy for t in c.tags}
    assert healthy >= {"frozen", "set-to-none", "accumulation", "clipping", "warm-up", "amp"}
    assert sum(1 for c in health if not c.healthy) >= 6
