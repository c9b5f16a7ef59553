"""A zombie has exited: every command that takes a PID exits 3 on it (`doctor` after its report says so)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dflash_contract import proc
from dflash_diag.cli import main
from dflash_diag.errors import ExitCode


@pytest.fixture
def zombie() -> Iterator[int]:
    """A child of this test process that has exited and is not reaped yet."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while (stat := proc.read_stat(child.pid)) is None or stat.state != "Z":
        assert time.monotonic() < deadline, "the child did not become a zombie"
        time.sleep(0.02)
    try:
        yield child.pid
    finally:
        child.wait()


def test_doctor_reports_the_zombie_and_exits_3(zombie: int, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", str(zombie), "--duration", "0.5", "--json"]) == ExitCode.NO_PROCESS
    report = json.loads(capsys.readouterr().out)
    assert "process-zombie" in [f["rule_id"] for f in report["findings"]]
    assert main(["doctor", str(zombie), "--duration", "0.5"]) == ExitCode.NO_PROCESS
    assert "zombie" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["snapshot", "{pid}", "-o", "{tmp}/s.tar.gz"], ["record", "{pid}", "-o", "{tmp}/t.json"],
                                  ["top", "--pid", "{pid}", "--batch", "--duration", "0.5"]])
def test_the_other_commands_exit_3_too(argv: list[str], zombie: int, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main([a.format(pid=zombie, tmp=tmp_path) for a in argv]) == ExitCode.NO_PROCESS
    assert capsys.readouterr().err.count("\n") == 1
