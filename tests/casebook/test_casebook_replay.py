"""The casebook replayed: every program's recorded observation, in every mode it runs in, judged again offline
through the path `doctor --replay FILE` takes (``snapshot.bundle.load_observation``, ``analysis.analyse``,
``view.doctor.doctor_doc``, the report as `--json` prints it) must name the planted cause in the headline, and give
no warning on a healthy program. The expectations and known misses are the live casebook's (``cases.py``), scored by
the same ``harness.score``.

The observations are fixtures (``observations/<case>__<mode>.json.gz``, gzip'd and redacted), recorded by
``bench/casebook.py --record tests/casebook/observations`` on the CPU (and ``--gpu --record`` on a GPU machine for
the GPU programs). A recording whose case or mode no longer exists fails, and so does a CPU (case, mode) without
one: a new program, or a change to what an observation holds (the schema's version), is recorded again. What runs
live in CI beside this is ``ci_runs.LIVE_RUNS``.
"""

from __future__ import annotations

import gzip
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cases import CASES, Case
from ci_runs import ALL_ENV, CPU_CASES, LIVE_FAMILIES, casebook_jobs
from harness import FIXTURE_SUFFIX, MODES, assert_diagnosed, replayed_report, score

FIXTURES = Path(__file__).resolve().parent / "observations"
RECORD = "bench/casebook.py --record tests/casebook/observations"
MAX_FIXTURES_BYTES = 14 << 20  # the whole directory: small enough for every clone (4.05 MiB before batch 6, 6.3 MiB with batch 12, 7.0 with batch 13, 7.4 with batch 14; 8 MiB raised to 10 for batch 15; 9.6 MiB with batch 20, raised to 12 for batch 21; 12.0 MiB with batch 27, raised to 14 for batch 28)


def _recorded() -> dict[tuple[str, str], Path]:
    """(case, mode) -> its fixture, from the file names."""
    out = {}
    for path in sorted(FIXTURES.glob(f"*{FIXTURE_SUFFIX}")):
        case, _, mode = path.name[: -len(FIXTURE_SUFFIX)].rpartition("__")
        out[(case, mode)] = path
    return out


def _every_cpu_run() -> list[tuple[Case, str]]:
    return [(c, m) for c in CPU_CASES for m in MODES if m in c.modes]


def _gpu_recorded() -> list[tuple[Case, str]]:
    """The GPU programs' recordings present (recorded on a GPU machine; none is required on the CPU)."""
    by_name = {c.name: c for c in CASES if c.gpu}
    return [(by_name[name], mode) for name, mode in _recorded() if name in by_name and mode in by_name[name].modes]


def _params(runs: list[tuple[Case, str]]) -> list[Any]:
    """Every run; a known miss (docs/benchmarks.md says why) is a non-strict expected failure, as it is live."""
    return [pytest.param(c, m, id=f"{c.name}-{m}",
                         marks=[pytest.mark.xfail(strict=False, reason=c.known_miss[m])] if m in c.known_miss else [])
            for c, m in runs]


def _check(case: Case, mode: str) -> None:
    path = _recorded().get((case.name, mode))
    assert path is not None, f"no recording of {case.name} ({mode}): record it with `{RECORD} --cases {case.name}`"
    assert_diagnosed(case, score(case, mode, replayed_report(path), 0.0))


@pytest.mark.parametrize(("case", "mode"), _params(_every_cpu_run()))
def test_recorded_case(case: Case, mode: str) -> None:
    _check(case, mode)


@pytest.mark.parametrize(("case", "mode"), _params(_gpu_recorded()))
def test_recorded_gpu_case(case: Case, mode: str) -> None:
    _check(case, mode)


def test_every_recording_is_of_a_case_and_mode_that_exist() -> None:
    known = {(c.name, m) for c in CASES for m in MODES if m in c.modes}
    stale = sorted(f"{c}__{m}" for c, m in set(_recorded()) - known)
    assert not stale, f"recordings of no current (case, mode): {stale}: remove them, or record the renamed case"


def test_every_cpu_case_and_mode_has_a_recording() -> None:
    """Every run has its observation, except a known miss that gave no report at all (an attach the program
    refused): there was nothing to observe, and the miss says so."""
    missing = sorted({c.name for c, m in _every_cpu_run() if (c.name, m) not in _recorded()
                      and not c.known_miss.get(m, "").split(": ", 1)[-1].startswith("no report")})
    assert not missing, f"no recording of {missing}: record them with `{RECORD} --cases {','.join(missing)}`"


def test_the_recordings_are_small_and_of_this_schema() -> None:
    from dflash_diag.observe.codec import OBSERVATION_SCHEMA, parse_document

    total = sum(p.stat().st_size for p in _recorded().values())
    assert total <= MAX_FIXTURES_BYTES, f"{total >> 10} KiB of recordings"
    path = next(iter(_recorded().values()))
    assert parse_document(gzip.decompress(path.read_bytes()))["schema"] == OBSERVATION_SCHEMA


def test_a_recording_that_no_longer_names_its_cause_fails(tmp_path: Path) -> None:
    """The replay is a test that can fail: a recording of the healthy twin under a planted cause's name misses."""
    case = next(c for c in CPU_CASES if c.name == "gil_hog_side_thread")
    twin = _recorded()[("healthy_pipeline", "outside")]
    shutil.copy(twin, tmp_path / "gil_hog_side_thread__outside.json.gz")
    r = score(case, "outside", replayed_report(tmp_path / "gil_hog_side_thread__outside.json.gz"), 0.0)
    assert not r.ok


def test_the_live_lane_keeps_every_stall_family_and_every_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    """What CI runs live: every hang and deadlock program that is not a known miss in all its modes, and each mode."""
    monkeypatch.delenv(ALL_ENV, raising=False)
    live = casebook_jobs()
    stalls = {c.name for c in CPU_CASES if c.family in LIVE_FAMILIES and set(c.modes) - set(c.known_miss)}
    assert stalls <= {c.name for c, _ in live}
    assert {m for _, m in live} == set(MODES)
    assert len(live) <= 12  # the live lane's budget: the replay carries the rest
