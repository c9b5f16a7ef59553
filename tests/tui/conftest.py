"""Shared fixtures of the ``top`` tests: a live threaded torch process for real py-spy to attach to."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
import workload as wl


@pytest.fixture(scope="session")
def workload() -> Iterator[subprocess.Popen[str]]:
    proc = wl.start(max_s=300)
    try:
        yield proc
    finally:
        wl.stop(proc)
