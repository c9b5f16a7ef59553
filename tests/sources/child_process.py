"""Start the small threaded torch pipeline (tests/fixtures/cpu/pipeline_child.py) for tests that attach to it."""

from __future__ import annotations

import os
import selectors
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CHILD = Path(__file__).resolve().parents[1] / "fixtures" / "cpu" / "pipeline_child.py"
READY_TIMEOUT_S = 90.0  # importing torch on a busy 2-core box can take a while


@contextmanager
def pipeline_child(*args: str, max_s: float = 60.0) -> Iterator[subprocess.Popen[str]]:
    """The child, once every thread runs (it printed READY); killed and reaped on exit."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), *args, "--max-s", str(max_s)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True, env=env,
    )
    try:
        assert proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + READY_TIMEOUT_S
        line = ""
        while time.monotonic() < deadline and proc.poll() is None:
            if sel.select(timeout=0.5):
                line = proc.stdout.readline().strip()
                break
        sel.close()
        if line != "READY":
            raise RuntimeError(f"pipeline child did not start (exit code {proc.poll()}, said {line!r})")
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()
