"""The issue's example through `doctor --attach`: a trainer whose four pool threads each call
`torch.set_num_threads(8)` on a 2-core box, started plain; `doctor --attach` puts the probes in (the settings probe
among them), diagnoses, takes them out again, and its headline names the oversubscribed CPUs (the casebook's
ensemble_num_threads runs the same program from outside, under `dflash-diag run` and with `attach`)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from attach_helpers import CLI, ROOT, env_for

pytestmark = pytest.mark.slow

PROGRAM = ROOT / "tests" / "casebook" / "programs" / "ensemble_num_threads" / "train_ensemble.py"


def test_doctor_attach_names_the_oversubscribed_pools(ptrace_ok: None, board_dir: Path, tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, str(PROGRAM)], cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT,
                                env=env, text=True)
    try:
        deadline = time.monotonic() + 180
        while not re.search(r"report 2 ", log.read_text()):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-500:]
            time.sleep(0.5)
        done = subprocess.run([*CLI, "doctor", str(proc.pid), "--attach", "--duration", "5", "--json"], cwd=ROOT,
                              env=env_for(board_dir), capture_output=True, text=True, timeout=240)
    finally:
        proc.kill()
        proc.wait()
    assert done.returncode == 0, done.stderr[-800:]
    report = json.loads(done.stdout)
    assert "settings" in report["attached"]["result"]["added"]  # the settings probe among those put in
    assert report["headline"]["rule_id"] == "cpu-oversubscribed", report["headline"]
    assert re.search(r"oversubscribed.*member", report["headline"]["text"])
    finding = next(f for f in report["findings"] if f["rule_id"] == "cpu-oversubscribed")
    assert finding["severity"] == "warning"
