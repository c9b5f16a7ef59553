"""The casebook's torchrun jobs in CI: a straggler rank, a collective only rank 0 calls, a rank whose training thread
died, and a healthy job, doctor given the launcher's PID or a rank's, attached from outside or under `dflash-diag
run -- python -m torch.distributed.run ...`: four runs that cover both modes and both kinds of PID.

Each run's observation was recorded (``bench/jobs.py --ci-runs --record tests/casebook/observations/jobs``) and is
judged again here offline, through the path `doctor --replay` takes; one of them also runs live (a job takes
20-40 s to start on two busy cores, 8 Python processes with its DataLoader workers), so the live job path (the
launcher's ranks found, the probes passed on to them, the window shared between them) stays honest. bench/jobs.py
runs every case in both modes from both PIDs, uneven shards included.
"""

from __future__ import annotations

import gzip
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cases import JOB_CASES, Case
from harness import FIXTURE_SUFFIX, TIME_TO_NAME_S, Result, assert_diagnosed, replayed_report, run_case, score

pytestmark = [pytest.mark.timeout(1200)]
# As the casebook's: the 10 s goal is bench/jobs.py's (the box to itself); CI checks that the answer came from one
# window, not from waiting on the job.
CI_ANSWER_BOUND_S = 3 * TIME_TO_NAME_S
FIXTURES = Path(__file__).resolve().parent / "observations" / "jobs"
RECORD = "bench/jobs.py --ci-runs --record tests/casebook/observations/jobs"

# (case, mode): the PID each gets is the case's ``targets[mode]``.
CI_RUNS = (("ddp_straggler", "outside"), ("ddp_thread_died", "outside"), ("ddp_rank0_barrier", "probes"),
           ("ddp_healthy", "probes"))
LIVE_RUN = ("ddp_rank0_barrier", "probes")  # under `dflash-diag run`, a rank's PID: the most moving parts
BY_NAME = {c.name: c for c in JOB_CASES}


def _replayed(case: Case, mode: str) -> Result:
    path = FIXTURES / f"{case.name}__{mode}{FIXTURE_SUFFIX}"
    assert path.exists(), f"no recording of {case.name} ({mode}): record it with `{RECORD}`"
    return score(case, mode, replayed_report(path), 0.0)


def _check(case: Case, mode: str, r: Result) -> None:
    assert not r.error, r.error
    job = r.report.get("job") or {}
    assert job.get("ranks"), f"doctor did not see the job: {r.report.get('warnings')}"
    assert len(job["ranks"]) == int(case.argv[case.argv.index("--nproc-per-node") + 1])
    assert_diagnosed(case, r)


def test_the_ci_runs_cover_both_modes_and_both_kinds_of_pid() -> None:
    seen = {(mode, BY_NAME[name].targets[mode].split(":")[0]) for name, mode in CI_RUNS}
    assert seen == {(m, t) for m in ("outside", "probes") for t in ("launcher", "rank")}  # a job has no attach mode


@pytest.mark.parametrize(("case", "mode"), [(BY_NAME[n], m) for n, m in CI_RUNS],
                         ids=[f"{n}-{m}-{BY_NAME[n].targets[m]}" for n, m in CI_RUNS])
def test_recorded_job_case(case: Case, mode: str) -> None:
    _check(case, mode, _replayed(case, mode))


def test_the_recordings_are_of_jobs_and_small() -> None:
    from dflash_diag.observe.codec import parse_document

    paths = sorted(FIXTURES.glob(f"*{FIXTURE_SUFFIX}"))
    assert {p.name[: -len(FIXTURE_SUFFIX)] for p in paths} == {f"{n}__{m}" for n, m in CI_RUNS}
    assert sum(p.stat().st_size for p in paths) <= 1 << 20
    assert all(parse_document(gzip.decompress(p.read_bytes()))["kind"] == "job" for p in paths)


@pytest.fixture(scope="module")
def live() -> Result:
    name, mode = LIVE_RUN
    case = BY_NAME[name]
    result = run_case(case, mode, target=case.targets[mode])
    if not result.ok:  # a starved box, not the diagnosis: once more before it counts
        result = run_case(case, mode, target=case.targets[mode])
    return result


@pytest.mark.slow
def test_the_live_job_is_named_within_one_window(live: Result) -> None:
    case = BY_NAME[LIVE_RUN[0]]
    _check(case, LIVE_RUN[1], live)
    assert live.seconds_to_answer < CI_ANSWER_BOUND_S, live.seconds_to_answer


@pytest.mark.slow
def test_the_probes_number_the_collectives_of_every_rank(live: Result) -> None:
    """Under `dflash-diag run`, every rank of the job published the collectives probe (the launcher passed the
    probes on to its ranks), and the hang names the collective's sequence number."""
    ranks = live.report["job"]["ranks"]
    assert all(row["probe"] is not None and row["probe"]["entered"] > 0 for row in ranks), ranks
    assert "collective #" in live.headline_text
    assert live.report["job"]["launcher_pid"] not in [row["pid"] for row in ranks]
