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


@pytest.fixture(scope="module")
def workload() -> Iterator[subprocess.Popen[str]]:
    """A live threaded torch process for real py-spy to attach to (the ``top`` tests: cli/ and tui/)."""
    import workload as wl

    # one per module that uses it (a busy process: alive for the whole session it took CPU from every other test);
    # the bound only keeps a crashed session from leaving it behind
    proc = wl.start(max_s=900)
    try:
        yield proc
    finally:
        wl.stop(proc)


@pytest.fixture(autouse=True)
def _no_probe_session_left_behind() -> Iterator[None]:
    """A test that started the probes in the test process and did not stop them (a failure half-way) must not hand
    their session, hooks and threads to the next test (under pytest-xdist, any test of the same worker)."""
    yield
    import sys

    probes = sys.modules.get("probes")
    if probes is not None and probes.current() is not None:
        probes.stop()
