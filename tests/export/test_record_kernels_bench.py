"""bench/record_kernels.py: its CPU dry run (the tiny trainer, `record --kernels --steps 2`) measures the trainer
before, during and after, checks the trace, and writes both reports; and its arithmetic on a trace."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from record_kernels import failed_checks, marked_rate  # noqa: E402


def test_the_rate_while_recording_comes_from_the_thread_that_stepped_most() -> None:
    doc = {"traceEvents": [{"ph": "i", "cat": "step", "tid": 7, "ts": t} for t in (0, 100_000, 200_000, 300_000)]
           + [{"ph": "i", "cat": "step", "tid": 8, "ts": 50_000}]}
    assert marked_rate(doc) == {"steps_per_s": 10.0, "marks": 4, "step_ms_median": 100.0}
    assert marked_rate({"traceEvents": []})["steps_per_s"] is None
    assert failed_checks({"trace": {"checks": {"a": True, "b": None, "c": False}}, "trainer_alive": True}) == ["c"]


@pytest.mark.slow
def test_dry_run_on_the_cpu_writes_both_reports(tmp_path: Path) -> None:
    from dflash_diag.inject.method import ptrace_helper, ptrace_unsupported

    if ptrace_helper() is None:
        pytest.skip(ptrace_unsupported())
    out = tmp_path / "rk"
    res = subprocess.run([sys.executable, str(ROOT / "bench" / "record_kernels.py"), "--dry-run", "--out", str(out)],
                         capture_output=True, text=True, timeout=400, cwd=ROOT)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    report = json.loads((out / "record_kernels.json").read_text())
    assert report["failed"] == [] and report["trainer_alive"]
    for window in ("quiet", "before", "during_command", "after"):
        assert report[window]["steps_per_s"] > 0, window
    assert report["record"]["reason"] == "steps" and report["record"]["stop_ms"] > 0
    checks = report["trace"]["checks"]
    assert checks["valid_trace_event_format"] and checks["training_threads_have_cpu_ops"]
    assert checks["kernels_on_stream_tracks"] is None  # no GPU here: not judged
    assert "| after (profiler removed) |" in (out / "record_kernels.md").read_text()
