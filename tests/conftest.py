"""Makes tests/ importable from every test directory (``from workload import pipeline_child``), and holds the
fixtures several directories share."""
from __future__ import annotations

import os
import signal
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
def _workload_process() -> Iterator[subprocess.Popen[str]]:
    """One live threaded torch process per module that uses it, stopped (SIGSTOP) between the tests that do: a
    busy process alive for the whole module took about a core from every other test of the lane (63 CPU-s of the
    top tests' 91 on 2 cores) for the few seconds each test samples it."""
    import workload as wl

    # the bound only keeps a crashed session from leaving it behind
    proc = wl.start(max_s=900)
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        yield proc
    finally:
        wl.stop(proc)  # continues it first: a stopped process holds a kill until then


@pytest.fixture
def workload(_workload_process: subprocess.Popen[str]) -> Iterator[subprocess.Popen[str]]:
    """A live threaded torch process for real py-spy to attach to (the ``top`` tests: cli/ and tui/), running for
    the test that asks for it."""
    proc = _workload_process
    os.kill(proc.pid, signal.SIGCONT)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGSTOP)


@pytest.fixture(autouse=True)
def _no_probe_session_left_behind() -> Iterator[None]:
    """A test that started the probes in the test process and did not stop them (a failure half-way) must not hand
    their session, hooks and threads to the next test (under pytest-xdist, any test of the same worker)."""
    yield
    import sys

    probes = sys.modules.get("probes")
    if probes is not None and probes.current() is not None:
        probes.stop()
