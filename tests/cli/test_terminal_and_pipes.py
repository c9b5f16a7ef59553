"""What reaches a terminal or a pipe: no escape sequence from another process, no traceback on a closed pipe.

A real child names a thread and its argv with terminal escapes, bidi overrides and Rich markup; every
command's text output about it shows them escaped. Every command's output piped into a reader that went
away (`| head`) ends quietly with exit code 141.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dflash_diag.cli import EXIT_BROKEN_PIPE, main
from dflash_diag.snapshot.bundle import write_dir

ROOT = Path(__file__).resolve().parents[2]
EVIL = "\x1b[2J\x1b]0;pwned\x07[bold red]MARKUP[/bold red]\u202e"
CHILD = f"""
import threading, time, sys
sys.path.insert(0, {str(ROOT)!r})
import probes
s = probes.start(probes.ProbesConfig(enabled=frozenset({{"queues"}}), publish_interval_s=0.2))
s.set_app(name={EVIL!r}, config={{"note": {EVIL!r}}})
def spin():
    while True:
        sum(range(5000))
threading.Thread(target=spin, name={EVIL!r}, daemon=True).start()
print("ready", flush=True)
time.sleep(120)
"""


@pytest.fixture
def evil_child(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    boards = tmp_path / "boards"
    boards.mkdir(mode=0o700)
    monkeypatch.setenv("DFLASH_DIAG_BOARD_DIR", str(boards))
    child = subprocess.Popen([sys.executable, "-c", CHILD, EVIL, "--lr", "[red]x[/red]"], stdout=subprocess.PIPE,
                             text=True, env={**os.environ, "DFLASH_DIAG_BOARD_DIR": str(boards)})
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 30
        while not (boards / f"{child.pid}.json").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        yield child.pid
    finally:
        child.kill()
        child.wait()


@pytest.mark.slow
def test_escapes_from_another_process_never_reach_the_terminal(evil_child: int, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    pid = str(evil_child)
    for argv in (["board", pid], ["board"], ["board", pid, "--json"], ["doctor", pid, "--duration", "1"],
                 ["doctor", pid, "--duration", "1", "--json"], ["top", "--pid", pid, "--batch", "--duration", "1"],
                 ["top", "--pid", pid, "--batch", "--duration", "1", "--json"],
                 ["snapshot", pid, "-o", str(tmp_path / "s.tar.gz"), "--duration", "0.5"]):
        code = main(argv)
        out = capsys.readouterr()
        assert code == 0, (argv, out.err)
        for raw in ("\x1b", "\x07", "\u202e"):
            assert raw not in out.out + out.err, (argv, raw)
    # ... and what was there is shown, escaped, not lost:
    main(["board", pid, "--json"])
    board = json.loads(capsys.readouterr().out)
    assert board["app"]["name"].startswith("\\x1b[2J")
    assert any(name.startswith("\\x1b[2J") for name in board["threads"].values())


def _bundle(path: Path) -> Path:
    doc = {"schema": "dflash-diag.snapshot/1", "pid": 1, "created_utc": "2026-01-01T00:00:00Z", "process": {"argv": []},
           "versions": {"torch": "2.1"}, "config": {f"key{i}": i for i in range(2000)}, "rates": {}, "env_knobs": {},
           "code": {"files": {}}, "findings": [], "threads": []}
    return write_dir(path, {"snapshot.json": json.dumps(doc).encode()}, force=False)


def _closed_pipe_run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    """Run the CLI with stdout a pipe whose reader is already gone (as after `| head -1`)."""
    read_fd, write_fd = os.pipe()
    os.close(read_fd)
    try:
        return subprocess.run([sys.executable, "-m", "dflash_diag", *argv], stdout=write_fd, stderr=subprocess.PIPE,
                              cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    finally:
        os.close(write_fd)


@pytest.mark.slow
def test_every_command_is_quiet_on_a_closed_pipe(tmp_path: Path) -> None:
    a, b = _bundle(tmp_path / "a"), _bundle(tmp_path / "b")
    runs = [["--help"], ["board", "--json"], ["board"], ["diff", str(a), str(b), "--json"], ["diff", str(a), str(b), "--all"]]
    from dflash_diag.cli import _COMMANDS  # every command there is, new ones included

    runs += [[cls[: -len("Command")].lower(), "--help"] for _module, cls in _COMMANDS]
    for argv in runs:
        out = _closed_pipe_run(argv, tmp_path)
        assert out.returncode in (EXIT_BROKEN_PIPE, 0), (argv, out.stderr)
        assert b"Traceback" not in out.stderr and b"Exception ignored" not in out.stderr, (argv, out.stderr)


@pytest.mark.slow
def test_sampling_commands_are_quiet_on_a_closed_pipe(evil_child: int, tmp_path: Path) -> None:
    pid = str(evil_child)
    for argv in (["board", pid, "--json"], ["doctor", pid, "--duration", "0.5", "--json"],
                 ["top", "--pid", pid, "--batch", "--duration", "0.5", "--json"],
                 ["record", pid, "-o", str(tmp_path / "t.json"), "--duration", "0.5", "--json"],
                 ["snapshot", pid, "-o", str(tmp_path / "p.tar.gz"), "--duration", "0.5", "--json"]):
        out = _closed_pipe_run(argv, tmp_path)
        assert out.returncode == EXIT_BROKEN_PIPE, (argv, out.stderr)
        assert b"Traceback" not in out.stderr and b"Exception ignored" not in out.stderr, (argv, out.stderr)
