"""bench/suite_cpu.py: a command's processes' CPU, attributed to the test that started each (its environment's
PYTEST_CURRENT_TEST), counted from the command's start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUSY = "import time\nend = time.process_time() + 1.2\nwhile time.process_time() < end: pass\n"


@pytest.mark.slow
def test_a_busy_child_is_counted_against_the_test_that_started_it(tmp_path: Path) -> None:
    out = tmp_path / "cpu.json"
    env = {**os.environ, "PYTEST_CURRENT_TEST": "tests/fake/test_x.py::test_busy (call)"}
    res = subprocess.run([sys.executable, str(ROOT / "bench" / "suite_cpu.py"), "--out", str(out), "--",
                          sys.executable, "-c", BUSY], capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 0, res.stderr
    rows = json.loads(out.read_text())["processes"]
    busy = [r for r in rows if r["test"].startswith("tests/fake/test_x.py::test_busy")]
    assert busy and max(r["cpu_s"] for r in busy) >= 0.9, rows
    assert "tests/fake/test_x.py" in res.stdout
    assert oct(out.stat().st_mode & 0o777) == "0o600"
    again = subprocess.run([sys.executable, str(ROOT / "bench" / "suite_cpu.py"), "--out", str(out), "--", "true"],
                           capture_output=True, text=True, timeout=60)
    assert again.returncode == 2 and "exists" in again.stderr and "Traceback" not in again.stderr
