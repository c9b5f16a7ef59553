"""``dflash-diag top`` end to end: real py-spy on a real threaded torch process, batch mode; and the error paths."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from workload import WORKLOAD

from dflash_diag.cli import main
from dflash_diag.errors import ExitCode

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str, timeout_s: float = 120.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dflash_diag", "top", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
    )


def _assert_plausible(report: dict, pid: int) -> None:
    assert report["schema"] == "dflash-diag.top/2"
    assert report["pid"] == pid and report["process_alive"] is True
    assert report["samples"] >= 2
    by_name = {t["name"]: t for t in report["threads"]}
    assert {"target-0", "drafter-0", "MainThread"} <= set(by_name)
    assert by_name["target-0"]["stage"] == "target" and by_name["drafter-0"]["stage"] == "drafter"
    for thread in report["threads"]:
        assert set(thread["shares"]) == set(report["states"])
        assert sum(thread["shares"].values()) == pytest.approx(1.0, abs=0.01)
        assert isinstance(thread["tid"], int)
    # MainThread only waits on an Event: idle. The pipeline threads compute, so they are not all idle.
    assert by_name["MainThread"]["shares"]["idle"] > 0.9
    assert by_name["target-0"]["shares"]["idle"] < 0.9
    assert report["stages"]["target"]["threads"] == ["target-0"]
    assert report["stages"]["drafter"]["threads"] == ["drafter-0"]
    assert report["pipeline"]["status"] == "ok" and report["pipeline"]["bottleneck"] in (
        "target",
        "drafter",
        "balanced",
        "unknown",
    )
    assert report["gpus"]["status"] == "na" and report["gpus"]["reason"]  # this CPU box has no NVML GPUs


@pytest.mark.slow
def test_batch_json_on_a_live_threaded_process(workload: subprocess.Popen[str]) -> None:
    res = _cli("--pid", str(workload.pid), "--batch", "--duration", "3", "--json", "--rate", "5")
    assert res.returncode == 0, res.stderr
    _assert_plausible(json.loads(res.stdout), workload.pid)


@pytest.mark.slow
def test_batch_text_on_a_live_threaded_process(workload: subprocess.Popen[str]) -> None:
    res = _cli(str(workload.pid), "--batch", "--duration", "2", "--rate", "5")
    assert res.returncode == 0, res.stderr
    for section in ("PIPELINE", "THREADS", "GPUS", "PROBES", "FINDINGS"):
        assert section in res.stdout
    assert "target-0" in res.stdout and "drafter-0" in res.stdout and "verdict (last" in res.stdout


@pytest.mark.slow
def test_batch_launch_mode_runs_the_command_and_stops_it(tmp_path: Path) -> None:
    log = tmp_path / "child.log"
    res = _cli(
        "--batch", "--duration", "2", "--json", "--rate", "5", "--child-log", str(log),
        "--", sys.executable, str(WORKLOAD), "--max-s", "300",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert {"target-0", "drafter-0"} <= {t["name"] for t in report["threads"]}
    assert "launched PID" in res.stderr and "stopped PID" in res.stderr
    with pytest.raises(ProcessLookupError):
        os.kill(report["pid"], 0)  # quit stopped the child
    assert "READY" in log.read_text()
    assert oct(log.stat().st_mode & 0o777) == "0o600"


def test_bad_pid_is_one_line_and_no_process_code(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["top", "--pid", "4194301", "--batch"]) == ExitCode.NO_PROCESS
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no process with PID 4194301" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["top"], "nothing to watch"),
        (["top", "1", "--rate", "0"], "--rate"),
        (["top", "1", "--json"], "--json needs --batch"),
        (["top", "1", "--duration", "-1", "--batch"], "--duration"),
        (["top", "--pid", "1", "--", "python", "x.py"], "not both"),
        (["top", "12", "x"], "takes no arguments"),
        (["top", "--pid", "0", "--batch"], "PID must be a number from 1 to 4194304"),
    ],
)
def test_usage_errors(argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == ExitCode.USAGE
    assert needle in capsys.readouterr().err


def test_missing_board_dir_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["top", "1", "--batch", "--board-dir", str(tmp_path / "nope")]) == ExitCode.BAD_INPUT
    assert "no such directory" in capsys.readouterr().err


def test_live_view_needs_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["top", str(os.getpid())]) == ExitCode.USAGE
    assert "use --batch" in capsys.readouterr().err


@pytest.mark.slow
def test_launch_of_a_non_python_command_is_diagnosed_and_stopped(tmp_path: Path) -> None:
    res = _cli("--batch", "--child-log", str(tmp_path / "log"), "--", "sleep", "60", timeout_s=60)
    assert res.returncode == ExitCode.NOT_PYTHON
    assert "not a Python process" in res.stderr and "stopped PID" in res.stderr
    assert "Traceback" not in res.stderr


def test_child_log_is_never_overwritten(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "log"
    log.write_text("precious")
    assert main(["top", "--batch", "--child-log", str(log), "--", "true"]) == ExitCode.EXISTS
    assert log.read_text() == "precious"


@pytest.mark.slow
def test_screenshot_of_a_live_process(workload: subprocess.Popen[str], tmp_path: Path) -> None:
    svg = tmp_path / "top.svg"
    res = _cli(
        str(workload.pid), "--screenshot", str(svg), "--duration", "3", "--size", "100x30", "--rate", "5"
    )
    assert res.returncode == 0, res.stderr
    text = svg.read_text()
    assert text.startswith("<svg") and "target-0" in text and "drafter-0" in text


def test_screenshot_needs_an_svg_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["top", "1", "--screenshot", "top.png"]) == ExitCode.USAGE
    assert "must end in .svg" in capsys.readouterr().err


@pytest.mark.slow
def test_batch_on_the_tiny_reference_trainer_reads_its_probe_board(tmp_path: Path) -> None:
    """Launch mode on the real trainer: threads by stage, the probes' board (isolated via --board-dir), clean stop."""
    board_dir = tmp_path / "board"
    board_dir.mkdir(mode=0o700)
    res = _cli(
        "--batch", "--duration", "3", "--json", "--board-dir", str(board_dir), "--child-log", str(tmp_path / "log"),
        "--", sys.executable, "-m", "reference_trainer", "--preset", "tiny", "--max-seconds", "120",
        "--wandb", "off", "--checkpoint-dir", str(tmp_path / "ckpt"),
        timeout_s=240,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr + (tmp_path / "log").read_text()[-2000:]
    report = json.loads(res.stdout)
    stages = {t["name"]: t["stage"] for t in report["threads"]}
    assert stages.get("target-0") == "target" and stages.get("drafter-0") == "drafter"
    assert report["probes"]["status"] == "ok", report["probes"]
    assert report["probes"]["board_path"].startswith(str(board_dir))
    assert "gil" in report["probes"]["summary"] and report["findings"]["status"] == "ok"
    assert "stopped PID" in res.stderr


def _drain(fd: int, until: bytes | None, timeout_s: float) -> bytes:
    """Read a pty until ``until`` shows up, the other side closes it, or the time is up."""
    buf = b""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and (until is None or until not in buf):
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: the app closed the terminal
                break
            if not chunk:
                break
            buf += chunk
    return buf


@pytest.mark.slow
def test_live_view_in_a_real_terminal_quits_on_q(workload: subprocess.Popen[str]) -> None:
    """The interactive path end to end: a pseudo-terminal, the real screen, `q` exits with 0."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    env = dict(os.environ, TERM="xterm-256color")
    app = subprocess.Popen(
        [sys.executable, "-m", "dflash_diag", "top", str(workload.pid), "--rate", "5"],
        stdin=slave, stdout=slave, stderr=slave, env=env, cwd=ROOT, start_new_session=True,
    )  # fmt: skip
    os.close(slave)
    try:
        assert b"target-0" in _drain(master, b"target-0", timeout_s=90)
        os.write(master, b"q")
        _drain(master, None, timeout_s=30)
        assert app.wait(timeout=60) == 0
    finally:
        if app.poll() is None:
            app.kill()
        os.close(master)


LIGHT = (str(WORKLOAD), "--light")  # threads target-0/drafter-0, no torch: starts fast


def _gone(pid: int, timeout_s: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def _launched_pid(text: str) -> int:
    return int(text.split("launched PID ", 1)[1].split(";", 1)[0])


@pytest.mark.slow
def test_ctrl_c_key_quits_the_live_view_and_stops_the_launched_command(tmp_path: Path) -> None:
    """docs/top.md says Ctrl-C quits: in a real terminal (raw mode: Ctrl-C is a key, not a signal)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    app = subprocess.Popen(
        [sys.executable, "-m", "dflash_diag", "top", "--child-log", str(tmp_path / "log"),
         "--", sys.executable, *LIGHT, "--max-s", "120"],
        stdin=slave, stdout=slave, stderr=slave, env=dict(os.environ, TERM="xterm-256color"), cwd=ROOT,
        start_new_session=True,
    )  # fmt: skip
    os.close(slave)
    try:
        seen = _drain(master, b"target-0", timeout_s=90)
        assert b"target-0" in seen, seen[-500:]
        os.write(master, b"\x03")  # the byte a terminal sends for Ctrl-C
        seen += _drain(master, None, timeout_s=30)
        assert app.wait(timeout=30) == 0
        text = seen.decode(errors="replace")
        assert "stopped PID" in text and _gone(_launched_pid(text))
    finally:
        if app.poll() is None:
            app.kill()
        os.close(master)


def _sigint_as_a_terminal_gives_it() -> None:
    """In the child before exec: SIGINT at its default and unblocked, as a shell's foreground command has it. A
    process started with SIGINT ignored keeps it ignored (POSIX; CPython then installs no KeyboardInterrupt), as a
    background job should: top did exactly that in the whole suite, where it inherited the xdist worker's state
    (60 s runs, passing alone), not a fault of its own."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


@pytest.mark.slow
def test_sigint_to_top_stops_it_and_the_launched_command(tmp_path: Path) -> None:
    top = subprocess.Popen(
        [sys.executable, "-m", "dflash_diag", "top", "--batch", "--duration", "120", "--child-log",
         str(tmp_path / "log"), "--", sys.executable, *LIGHT, "--max-s", "300"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, stdin=subprocess.DEVNULL,
        preexec_fn=_sigint_as_a_terminal_gives_it,
    )  # fmt: skip
    first = ""
    try:
        assert top.stderr is not None
        first = top.stderr.readline()
        assert "launched PID" in first, first
        time.sleep(3.0)  # attached and sampling
        top.send_signal(2)
        try:
            out, err = top.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            status = Path(f"/proc/{top.pid}/status").read_text()
            masks = [line for line in status.splitlines() if line.startswith("Sig")]
            from dflash_diag.sources.pyspy_find import find_pyspy

            spy = find_pyspy()
            stack = subprocess.run([spy, "dump", "--pid", str(top.pid)], capture_output=True, text=True,
                                   timeout=30).stdout if spy else "(no py-spy)"
            raise AssertionError(f"top still runs 60 s after SIGINT: {masks}\n{stack}") from None
        assert top.returncode == 130, err
        assert "stopped PID" in err and "Traceback" not in err
        assert _gone(_launched_pid(first))
    finally:
        if top.poll() is None:
            top.kill()
            top.wait(timeout=30)
        if "launched PID " in first:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(_launched_pid(first), signal.SIGKILL)  # its own session: top's kill does not reach it


@pytest.mark.slow
@pytest.mark.parametrize("how", ["exec", "fork"])
def test_launch_follows_a_wrapper_to_the_interpreter(tmp_path: Path, how: str) -> None:
    """`top -- python train.py` where `python` is a wrapper: a pyenv-style shim that execs the interpreter after
    some shell work, or a script that starts it as a child. Both were "PID N (bash) is not a Python process"."""
    shim = tmp_path / "python"
    run = f'exec "{sys.executable}" "$@"' if how == "exec" else f'"{sys.executable}" "$@"'
    shim.write_text(f"#!/bin/bash\nsleep 0.5\n{run}\n")
    shim.chmod(0o755)
    res = _cli("--batch", "--duration", "2", "--json", "--rate", "5", "--child-log", str(tmp_path / "log"),
               "--", str(shim), *LIGHT, "--max-s", "300", timeout_s=180)
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert {"target-0", "drafter-0"} <= {t["name"] for t in report["threads"]}
    launched = _launched_pid(res.stderr)
    if how == "exec":
        assert report["pid"] == launched  # exec keeps the PID
    else:
        assert report["pid"] != launched and "is a wrapper; watching its Python interpreter" in res.stderr
    assert "stopped PID" in res.stderr
    assert _gone(report["pid"]) and _gone(launched)
