"""`dflash-diag --help` and `python -m reference_trainer --help` work from a fresh install, without a GPU."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dflash_diag import __version__
from dflash_diag.cli import _COMMANDS, _command_name

SUBCOMMANDS = [_command_name(cls) for _, cls in _COMMANDS]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120)


def test_top_level_help_lists_every_command() -> None:
    proc = _run("-m", "dflash_diag", "--help")
    assert proc.returncode == 0, proc.stderr
    assert {"top", "doctor", "snapshot", "diff", "run", "board", "attach", "detach"} <= set(SUBCOMMANDS)
    assert [name for name in SUBCOMMANDS if f"    {name} " not in proc.stdout] == []


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_every_subcommand_has_help(name: str) -> None:
    proc = _run("-m", "dflash_diag", name, "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"usage: dflash-diag {name}")
    assert "not available" not in proc.stdout  # no placeholder command is left


def test_no_command_prints_help_and_exits_2() -> None:
    proc = _run("-m", "dflash_diag")
    assert proc.returncode == 2 and "usage: dflash-diag" in proc.stdout


def test_version() -> None:
    proc = _run("-m", "dflash_diag", "--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"dflash-diag {__version__}"


@pytest.mark.slow
def test_reference_trainer_help() -> None:
    proc = _run("-m", "reference_trainer", "--help")
    assert proc.returncode == 0, proc.stderr
    for flag in ("--preset", "--target-devices", "--drafter-devices", "--use-reentrant", "--resume",
                 "--max-steps", "--max-seconds", "--summary-json", "--probes", "--scenario"):
        assert flag in proc.stdout
    assert "Traceback" not in proc.stderr


def test_a_missing_dependency_is_one_line_naming_the_package() -> None:
    """`pip install --no-deps .` into an environment without rich: not a traceback, the package to install."""
    import subprocess
    import sys

    code = "import sys; sys.modules['rich'] = None; from dflash_diag.cli import main; raise SystemExit(main(['--help']))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 5, out.stderr
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert "the Python package rich is missing" in out.stderr and "pip install rich" in out.stderr
