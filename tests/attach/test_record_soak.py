"""CI's short run of bench/record_soak.py: `record --kernels` recorded against CPU torch programs of every shape
(a main-thread trainer beside a spinning thread, three training threads, threads that come and go), one with a
concurrent `doctor`; and probes.kernels started in-process from a signal handler many times over. No program may
be lost. The long soak (hundreds of recordings) and its figures are in docs/benchmarks.md; the stop's ordering,
which the crash came from, is held exactly by tests/probes/test_kernels_recording.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from attach_helpers import ROOT

pytestmark = pytest.mark.slow


def _soak(out: Path, *args: str) -> dict:
    res = subprocess.run([sys.executable, str(ROOT / "bench" / "record_soak.py"), "--out", str(out), *args],
                         capture_output=True, text=True, timeout=900, cwd=ROOT)
    report = json.loads((out / "record_soak.json").read_text())
    assert res.returncode == 0 and report["lost"] == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return report


def test_record_kernels_loses_no_program_of_any_shape(ptrace_ok: None, tmp_path: Path) -> None:
    report = _soak(tmp_path / "cli", "--via", "cli", "--recordings", "3", "--per-target", "1", "--doctor-every", "2",
                   "--durations", "0.5")
    assert report["recordings"] == 3 and report["ok"] == 3, report
    assert report["with_doctor"] == 1


def test_recordings_started_at_bytecode_boundaries_lose_no_program(tmp_path: Path) -> None:
    # every shape four times (12 recordings, 18 s on the quiet box; 24 took 49 s of a loaded first lane)
    report = _soak(tmp_path / "signal", "--via", "signal", "--recordings", "12", "--per-target", "4")
    assert report["recordings"] == 12 and report["ok"] == 12, report
