"""Every command's arguments, fuzzed: whatever the user types, no traceback, one line on stderr for an error,
and a documented exit code (README's table). In-process ``main()``, bounded examples: quick.

The flags and their kinds come from the real parser, so a new flag is fuzzed without touching this file.
Values are drawn from the inputs that broke earlier versions (1e999, a 20-digit PID, non-UTF-8 bytes as
argparse hands them over, escape sequences, Rich markup, /proc, very long names) and from arbitrary text.
PIDs are ones that cannot start real work: invalid ones, one that does not exist, and (for the commands that
only read) a non-Python `sleep` child. `run` is never given a program that exists; `export` (a server) always
ends with a --port it refuses.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dflash_diag.cli import build_parser, main

DOCUMENTED_EXIT_CODES = {0, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14}
NASTY = ["", " ", "0", "-1", "1", "1e999", "-1e999", "nan", "inf", "99999999999999999999", "4194301", "4194305",
         "abc", "12x", "\udcff\udcfe", "\x1b[2J", "[red]x[/red]", "/proc/x.tar.gz", "/", ".", "..", "a" * 300,
         "x.tar.gz", "x.zip", "auto", "all", "none", "gil,-gil", "nope", "0.001", "3600", "1e6", "-", "--", "=",
         "120x40", "0x0", "x.svg", "/nonexistent/dir"]
FAKE_PIDS = ["4194301", "0", "-1", "99999999999999999999", "abc", "1e3", " 12", "\udcff", "4194305"]


@pytest.fixture(scope="module")
def sleeper() -> Iterator[int]:
    proc = subprocess.Popen(["sleep", "600"])
    yield proc.pid
    proc.kill()
    proc.wait()


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _options(sub: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in sub._actions if a.option_strings and not isinstance(a, argparse._HelpAction)]


def _argv(draw: st.DrawFn, name: str, sub: argparse.ArgumentParser, real_pid: int) -> list[str]:
    values = st.sampled_from(NASTY) | st.text(max_size=12)
    pids = st.sampled_from(FAKE_PIDS + ([str(real_pid)] if name in ("board", "top", "snapshot") else []))
    argv = [name]
    for action in draw(st.lists(st.sampled_from(_options(sub)), max_size=4, unique_by=id)):
        if name == "doctor" and action.dest == "attach":
            continue  # never a debugger in a fuzz test
        argv.append(draw(st.sampled_from(action.option_strings)))
        if action.nargs != 0:
            argv.append(draw(st.sampled_from(list(action.choices)) if action.choices and draw(st.booleans()) else values))
    positional = [a for a in sub._actions if not a.option_strings]
    for action in positional:
        if action.dest in ("program", "launch_command"):
            if name == "run" and draw(st.booleans()):
                argv += ["--", "no-such-program-dflash-fuzz", *draw(st.lists(values, max_size=2))]
            continue
        if action.dest == "pid" and (action.nargs != "?" or draw(st.booleans())):
            argv.append(draw(pids))
        elif action.dest in ("a", "b"):
            argv.append(draw(values))
    if name == "export":  # a server: it must never start serving here; the last --port wins and is refused
        argv += ["--port", draw(st.sampled_from(["-1", "70000", "abc", "1e999", ""]))]
    return argv


@st.composite
def _argv_for(draw: st.DrawFn, name: str, sub: argparse.ArgumentParser, real_pid: int) -> list[str]:
    return _argv(draw, name, sub, real_pid)


@pytest.mark.parametrize("name", sorted(_subparsers()))
def test_fuzzed_arguments_give_one_line_and_a_documented_code(name: str, sleeper: int, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)  # whatever a relative path names, it is in here
    boards = tmp_path / "boards"
    boards.mkdir(mode=0o700, exist_ok=True)
    monkeypatch.setenv("DFLASH_DIAG_BOARD_DIR", str(boards))
    sub = _subparsers()[name]

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(st.data())
    def check(data: st.DataObject) -> None:
        argv = data.draw(_argv_for(name, sub, sleeper))
        code = main(argv)
        out = capsys.readouterr()
        assert "Traceback" not in out.err and "Traceback" not in out.out, (argv, out.err)
        assert code in DOCUMENTED_EXIT_CODES, (argv, code, out.err)
        if code != 0 and "--help" not in argv and "-h" not in argv:
            assert out.err.count("\n") == 1, (argv, out.err)
        assert "\x1b" not in out.err, (argv, out.err)

    check()
    # Nothing was written where the fuzzed paths point: no fuzzed command got far enough to write.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["boards"]


def test_a_twenty_digit_pid_and_infinity_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["board", "99999999999999999999"], ["doctor", "99999999999999999999"],
                 ["snapshot", "99999999999999999999"], ["top", "--pid", "99999999999999999999", "--batch"],
                 ["doctor", "4194301", "--duration", "1e999"], ["top", "--pid", "4194301", "--batch", "--duration", "inf"],
                 ["snapshot", "4194301", "--duration", "nan"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err and err.startswith(f"dflash-diag {argv[0]}: error:"), err


def test_run_names_itself_not_a_list(capsys: pytest.CaptureFixture[str]) -> None:
    """`dflash-diag []: error:` came from run's REMAINDER argument shadowing the command name."""
    assert main(["run"]) == 2
    assert capsys.readouterr().err.startswith("dflash-diag run: error: no command given")
    assert main(["run", "--", "no-such-program-dflash-fuzz"]) == 6
    assert capsys.readouterr().err.startswith("dflash-diag run: error: command not found")


def test_non_utf8_arguments_from_a_real_shell(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 (a file name from another locale) reach argparse as surrogates."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    for argv in ([b"board", b"--board-dir", b"/tmp/\xff\xfe"], [b"board", b"4194301", b"--board-dir", b"/tmp/\xff"],
                 [b"snapshot", b"4194301", b"-o", b"\xff.tar.gz"], [b"diff", b"\xff", b"\xfe"],
                 [b"top", b"--pid", b"\xff", b"--batch"]):
        out = subprocess.run([os.fsencode(sys.executable), b"-m", b"dflash_diag", *argv], capture_output=True,
                             env=env, cwd=tmp_path, timeout=60)
        assert out.returncode in DOCUMENTED_EXIT_CODES, (argv, out.stderr)
        assert out.stderr.count(b"\n") == (out.returncode != 0) and b"Traceback" not in out.stderr, (argv, out.stderr)
