"""Makes tests/ importable from every test directory (``from workload import pipeline_child``), and holds the
fixtures several directories share."""
from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def board_dir(tmp_path: Path) -> Path:
    """A private (0700) board directory of the test's own (attach/ and snapshot/ have variants of their own)."""
    d = tmp_path / "boards"
    d.mkdir(mode=0o700)
    os.chmod(d, 0o700)
    return d


@pytest.fixture(scope="session")
def workload() -> Iterator[subprocess.Popen[str]]:
    """A live threaded torch process for real py-spy to attach to (the ``top`` tests: cli/ and tui/)."""
    import workload as wl

    # it lives for the whole session (the `top` tests of tui/ run last, minutes after cli/ started it): the
    # bound only keeps a crashed session from leaving it behind
    proc = wl.start(max_s=1800)
    try:
        yield proc
    finally:
        wl.stop(proc)


_EARLY = {"tests/casebook/test_casebook.py": "casebook", "tests/casebook/test_jobs.py": "jobs"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The casebook's and the jobs' program runs start now, in the background, and their tests go last: they wait
    on their programs most of the time, beside the rest of the suite (tests/casebook/ci_runs.py)."""
    root = Path(__file__).resolve().parent.parent
    kinds: set[str] = set()
    late: list[pytest.Item] = []
    for item in items:
        path = Path(str(item.path)).resolve()
        kind = _EARLY.get(path.relative_to(root).as_posix()) if path.is_relative_to(root) else None
        if kind is not None:
            late.append(item)
            if "results" in getattr(item, "fixturenames", ()):
                kinds.add(kind)
    if not late or len(late) == len(items):
        return  # the casebook alone: its fixture runs it in the foreground
    moved = set(late)
    items[:] = [i for i in items if i not in moved] + late
    import sys

    sys.path.insert(0, str(root / "tests" / "casebook"))
    from ci_runs import start_early

    start_early(kinds)
