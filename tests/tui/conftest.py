"""Shared fixtures of the ``top`` tests: a live threaded torch process for real py-spy to attach to."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WORKLOAD = Path(__file__).with_name("threaded_workload.py")


@pytest.fixture(scope="session")
def workload() -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, str(WORKLOAD), "--seconds", "300"], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    try:
        assert proc.stdout is not None
        assert (
            proc.stdout.readline().strip() == "ready"
        )  # blocks until its threads run (torch import included)
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=30)
