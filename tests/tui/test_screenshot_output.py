"""`top --screenshot` writes like every other output: a temporary sibling renamed into place, one line and
exit 11 when the place cannot be written (full disk, missing directory, name too long), never a traceback
(let alone one with the app's local variables), never a truncated SVG under the final name."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import workload as wl
from top_fakes import FakeSource, make_frame

from dflash_diag.cli import main
from dflash_diag.errors import ExitCode
from dflash_diag.tui.app import TopApp

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def light() -> Iterator[subprocess.Popen[str]]:
    """A live threaded Python process without torch, for real py-spy to attach to."""
    proc = wl.start("--light", max_s=300)
    try:
        yield proc
    finally:
        wl.stop(proc)


def _top(pid: int, shot: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dflash_diag", "top", str(pid), "--screenshot", shot,
                           "--duration", "1", "--rate", "5", *extra], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


def _one_line(res: subprocess.CompletedProcess[str]) -> str:
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr, res.stderr[-3000:]
    return res.stderr


@pytest.mark.slow
def test_a_screenshot_is_written_whole(light: subprocess.Popen[str], tmp_path: Path) -> None:
    svg = tmp_path / "top.svg"
    res = _top(light.pid, str(svg))
    assert res.returncode == ExitCode.OK, res.stderr[-3000:]
    assert svg.read_text().rstrip().endswith("</svg>") and oct(svg.stat().st_mode & 0o777) == "0o600"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["top.svg"]


@pytest.mark.slow
def test_a_full_disk_is_one_line_and_leaves_nothing(light: subprocess.Popen[str], tmp_path: Path) -> None:
    mnt = tmp_path / "small"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(mnt)],
                                           capture_output=True).returncode != 0:
        pytest.skip("needs root to mount a small tmpfs")
    try:
        (mnt / "keep.txt").write_text("mine")
        res = _top(light.pid, str(mnt / "top.svg"), "--size", "200x60")  # ~100 KB of SVG into 16 KiB
        assert res.returncode == ExitCode.CANNOT_WRITE, res.stderr[-3000:]
        err = _one_line(res)
        assert "no space left" in err and "screenshot written" not in err and "locals" not in err
        assert sorted(p.name for p in mnt.iterdir()) == ["keep.txt"]  # no truncated top.svg, no temporary
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


@pytest.mark.parametrize("where", ["missing dir", "long name", "long path", "a file as dir"])
def test_unwritable_places_are_exit_11_before_attaching(where: str, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "file").write_text("mine")
    shot = {
        "missing dir": tmp_path / "no-such-dir" / "top.svg",
        "long name": tmp_path / ("x" * 5000 + ".svg"),
        "long path": tmp_path.joinpath(*["d" * 50] * 100) / "top.svg",  # 5,000 bytes of short components
        "a file as dir": tmp_path / "file" / "top.svg",
    }[where]
    # PID 4194301 is not running: the destination is refused first, before anything is attached.
    assert main(["top", "--pid", "4194301", "--screenshot", str(shot), "--duration", "1"]) == ExitCode.CANNOT_WRITE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and len(err) < 600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


@pytest.mark.parametrize("argv", [
    ["top", "--pid", "1", "--screenshot", ""],
    ["top", "--batch", "--child-log", "", "--", "true"],
    ["snapshot", "1", "-o", ""],
    ["snapshot", "1", "--dir", "-o", ""],
    ["record", "1", "-o", ""],
])
def test_an_empty_output_path_is_a_usage_error(argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """`-o ""` used to mean the default name, quietly."""
    monkeypatch.chdir(tmp_path)
    assert main(argv) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "empty" in err
    assert list(tmp_path.iterdir()) == []


SECRET = "hf_localVariableSecretValue0123456789"


class _Crashing(TopApp):
    CSS_PATH = Path(sys.modules[TopApp.__module__].__file__ or "").parent / "top.tcss"  # beside the app, not here

    def on_mount(self) -> None:
        token = SECRET  # a local a crash report must not print
        raise RuntimeError(f"planted failure ({len(token)} characters)")


def test_a_crash_report_of_the_app_shows_no_local_variables(capfd: pytest.CaptureFixture[str]) -> None:
    app = _Crashing(FakeSource(), initial_frame=make_frame(), start_sampler=False)
    app.run(headless=True, size=(100, 30))
    err = capfd.readouterr().err
    assert "planted failure" in err  # the report is there ...
    assert SECRET not in err and "locals" not in err  # ... without the locals panel Textual shows by default
