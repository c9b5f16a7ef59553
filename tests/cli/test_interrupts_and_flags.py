"""Ctrl-C at any moment of a command, the first fraction of a second included: exit 130, never a traceback;
`top --screenshot` interrupted: 130, and no screenshot. `--job --no-job` is a usage error, not the last one winning."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dflash_diag.cli import main
from dflash_diag.errors import ExitCode

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("command", ["doctor", "top", "record", "snapshot"])
def test_job_and_no_job_together_are_a_usage_error(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [command, "--pid", "1"] if command == "top" else [command, "1"]
    assert main([*argv, "--job", "--no-job"]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not allowed with argument --job" in err


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # a background job's SIGINT may be ignored: Ctrl-C's, as a terminal


# Ctrl-C while the commands' modules load (what took the first ~0.25 s): sent the moment the doctor command's
# module starts loading, inside main().
_CTRL_C_WHILE_LOADING = """
import importlib, os, signal, sys
import dflash_diag.cli as cli
real = importlib.import_module
def import_module(name, *args):
    if name == "dflash_diag.cli.doctor":
        os.kill(os.getpid(), signal.SIGINT)
    return real(name, *args)
importlib.import_module = import_module
sys.exit(cli.main(["doctor", "1"]))
"""


def test_ctrl_c_while_the_commands_load_is_130_without_a_traceback() -> None:
    res = subprocess.run([sys.executable, "-c", _CTRL_C_WHILE_LOADING], capture_output=True, text=True, timeout=60,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, preexec_fn=_default_sigint)
    assert res.returncode == 130 and res.stderr == "", (res.returncode, res.stderr[-2000:])


def test_the_entry_module_loads_almost_nothing_before_main_runs() -> None:
    """The `dflash-diag` script imports dflash_diag.cli, then calls main(): an interrupt before main() is Python's
    own (a traceback); that window is now the interpreter's start and a few milliseconds of ours."""
    code = "import sys, dflash_diag.cli; print(sorted(m for m in sys.modules if m.startswith(('dflash', 'rich', 'probes'))))"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert res.stdout.strip() == "['dflash_diag', 'dflash_diag.cli', 'dflash_diag.errors']", res.stdout


SLEEPER = "import time\nwhile True:\n    time.sleep(0.05)\n"


@pytest.mark.slow
def test_top_screenshot_ended_by_ctrl_c_is_130_and_writes_nothing(tmp_path: Path) -> None:
    """It ended quietly with exit 1 (Textual swallowed the interrupt: the command knew only that no screenshot was
    taken)."""
    program = subprocess.Popen([sys.executable, "-c", SLEEPER])
    shot = tmp_path / "shot.svg"
    try:
        top = subprocess.Popen([sys.executable, "-m", "dflash_diag", "top", str(program.pid), "--screenshot", str(shot),
                                "--duration", "60"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, preexec_fn=_default_sigint)
        time.sleep(8)  # attached, the app running and drawing (its screenshot is due at 60 s)
        t0 = time.monotonic()
        top.send_signal(signal.SIGINT)
        _, err = top.communicate(timeout=60)
        took_s = time.monotonic() - t0
    finally:
        program.kill()
        program.wait()
    assert top.returncode == 130, (top.returncode, err[-2000:])
    assert "Traceback" not in err and took_s < 20
    assert not shot.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".dflash-diag-tmp")]
