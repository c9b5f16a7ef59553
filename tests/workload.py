"""Start the one threaded test workload (tests/fixtures/cpu/pipeline_child.py) and always reap it.

    with pipeline_child("--mode", "drafter-bound", "--hog") as child: ...     # torch pipeline
    with pipeline_child("--light", "--probes", env={...}) as child: ...      # no torch, probes on
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKLOAD = ROOT / "tests" / "fixtures" / "cpu" / "pipeline_child.py"
READY_TIMEOUT_S = 90.0  # importing torch on a busy 2-core box can take a while


def start(*args: str, max_s: float = 60.0, env: dict[str, str] | None = None,
          cwd: Path | None = None) -> subprocess.Popen[str]:
    """The workload, once every thread runs (it printed READY). The caller stops it (``stop``)."""
    child_env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", **(env or {})}
    child_env["PYTHONPATH"] = str(ROOT) + os.pathsep + child_env.get("PYTHONPATH", "")  # the probes package
    proc = subprocess.Popen(
        [sys.executable, str(WORKLOAD), *args, "--max-s", str(max_s)], stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True, env=child_env, cwd=str(cwd or ROOT),
    )
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + READY_TIMEOUT_S
    line = ""
    while time.monotonic() < deadline and proc.poll() is None and line != "READY":
        if sel.select(timeout=0.5):
            line = proc.stdout.readline().strip()
    sel.close()
    if line != "READY":
        stop(proc)
        raise RuntimeError(f"the workload did not start (exit code {proc.poll()}, said {line!r})")
    return proc


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        try:
            os.kill(proc.pid, signal.SIGCONT)  # a test may have stopped it
        except ProcessLookupError:
            pass
        proc.kill()
    proc.wait(timeout=30)
    if proc.stdout is not None:
        proc.stdout.close()


@contextmanager
def pipeline_child(*args: str, max_s: float = 60.0, env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[str]]:
    proc = start(*args, max_s=max_s, env=env)
    try:
        yield proc
    finally:
        stop(proc)
