"""Where boards live, across users and crashes: root reads a user's board; a squatted /tmp/dflash-diag-UID is
said loudly and worked around; boards of processes that died are cleaned up (only ours, only theirs);
(the one staleness rule: tests/findings/test_one_staleness_rule.py).

The cross-user tests run a real program as `nobody` with the system Python (the venv's interpreter lives
under /root); they need root and are skipped without it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from dflash_contract import proc
from dflash_contract.board import (
    BOARD_SCHEMA,
    candidate_dirs,
    choose_board_dir,
    remove_stale_boards,
    tmp_board_dir,
)
from dflash_diag.cli import main
from dflash_diag.errors import ExitCode
from dflash_diag.sources.board import list_boards, read_board

ROOT = Path(__file__).resolve().parents[2]
NOBODY = 65534
SYSTEM_PY = "/usr/bin/python3"
CHILD = """
import signal, sys, time
sys.path.insert(0, {root!r})
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # exit through atexit: the session removes its board
import probes
s = probes.start(probes.ProbesConfig(enabled=frozenset({{"queues"}}), publish_interval_s=0.2))
print("ready", s.board_path, flush=True)
time.sleep(60)
"""


def _as_nobody_ok() -> bool:
    if os.getuid() != 0 or not os.access(SYSTEM_PY, os.X_OK):
        return False
    out = subprocess.run([SYSTEM_PY, "-c", f"import sys; sys.path.insert(0, {str(ROOT)!r}); import probes"],
                         user=NOBODY, group=NOBODY, capture_output=True, timeout=60, cwd="/")
    return out.returncode == 0


needs_nobody = pytest.mark.skipif(not _as_nobody_ok(), reason="needs root and a system Python usable as nobody")


def _start_as_nobody(env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    child = subprocess.Popen([SYSTEM_PY, "-c", CHILD.format(root=str(ROOT))], user=NOBODY, group=NOBODY, cwd="/",
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None
    line = child.stdout.readline().split()
    assert line[:1] == ["ready"], (line, child.stderr.read() if child.poll() is not None and child.stderr else "")
    return child, line[1]


def _stop(child: subprocess.Popen[str]) -> str:
    child.send_signal(signal.SIGTERM)
    try:
        _, err = child.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        child.kill()
        _, err = child.communicate()
    return err


@pytest.fixture
def nobody_dir() -> Iterator[Path]:
    """A board directory of nobody's own, reachable by nobody (pytest's tmp_path is not)."""
    parent = Path(tempfile.mkdtemp(prefix="dflash-diag-test-", dir="/tmp"))
    os.chmod(parent, 0o711)
    boards = parent / "boards"
    boards.mkdir(mode=0o700)
    os.chown(boards, NOBODY, NOBODY)
    yield boards
    shutil.rmtree(parent)  # made by this fixture, holds only what the child wrote


@pytest.mark.slow
@needs_nobody
def test_root_finds_and_reads_a_users_board(nobody_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env = {"PATH": "/usr/bin:/bin", "DFLASH_DIAG_BOARD_DIR": str(nobody_dir)}
    child, board_path = _start_as_nobody(env)
    try:
        assert Path(board_path).parent == nobody_dir
        os.environ.pop("DFLASH_DIAG_BOARD_DIR", None)  # root's own setting must not matter
        board = read_board(child.pid)  # found through the process's own environment, owned by uid 65534
        assert board.writer.pid == child.pid
        assert main(["board", str(child.pid), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["writer"]["pid"] == child.pid
    finally:
        _stop(child)


@pytest.mark.slow
@needs_nobody
def test_another_user_is_told_the_board_is_private(capsys: pytest.CaptureFixture[str]) -> None:
    """nobody asks about a root process: "private to that user", not "run it under probes"."""
    site = next(p for p in sys.path if p.endswith("site-packages") and "/.venv/" in p)
    code = (f"import sys; sys.path[:0] = [{str(ROOT)!r}, {site!r}]; from dflash_diag.cli import main; "
            f"sys.exit(main(['board', '{os.getpid()}']))")
    out = subprocess.run([SYSTEM_PY, "-c", code], user=NOBODY, group=NOBODY, cwd="/", capture_output=True,
                         text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == ExitCode.PERMISSION, out.stderr
    assert "private to that user" in out.stderr and "run it under probes" not in out.stderr
    assert out.stderr.count("\n") == 1


@pytest.mark.slow
@needs_nobody
def test_squatted_tmp_dir_is_said_loudly_and_worked_around() -> None:
    """Root (standing in for another local user) creates /tmp/dflash-diag-65534 first."""
    squat = tmp_board_dir(NOBODY)
    if os.path.lexists(squat):
        pytest.skip(f"{squat} exists already (not made by this test)")
    squat.mkdir(mode=0o700)  # owned by root: nobody's probes must not use it
    before = {p.name for p in squat.parent.iterdir() if p.name.startswith(f"dflash-diag-{NOBODY}-")}
    child = None
    try:
        child, board_path = _start_as_nobody({"PATH": "/usr/bin:/bin"})
        fallback = Path(board_path).parent
        assert fallback != squat and fallback.name.startswith(f"dflash-diag-{NOBODY}-")
        assert fallback.stat().st_uid == NOBODY and fallback.stat().st_mode & 0o777 == 0o700
        assert read_board(child.pid).writer.pid == child.pid  # readers find the fallback
        err = _stop(child)
        child = None
        assert "WARNING" in err and "belongs to uid 0" in err and str(fallback) in err, err
        assert list(squat.iterdir()) == []  # nothing was written into the squatted directory
    finally:
        if child is not None:
            _stop(child)
        squat.rmdir()  # made by this test, empty
        for p in squat.parent.iterdir():  # the fallback the child made (its board is gone at exit)
            if p.name.startswith(f"dflash-diag-{NOBODY}-") and p.name not in before:
                for name in os.listdir(p):  # only if the child was killed before it could remove its board
                    if name.endswith(".json"):
                        os.unlink(p / name)
                p.rmdir()


@pytest.mark.slow
@needs_nobody
def test_run_says_so_loudly_and_prints_the_board_it_will_really_use() -> None:
    """`run` checks the board directory before it starts the program: a squatted default is named in a
    WARNING, the program gets a private fallback, and the board path `run` prints is the real one."""
    squat = tmp_board_dir(NOBODY)
    if os.path.lexists(squat):
        pytest.skip(f"{squat} exists already (not made by this test)")
    squat.mkdir(mode=0o700)
    before = {p.name for p in squat.parent.iterdir() if p.name.startswith(f"dflash-diag-{NOBODY}-")}
    site = next(p for p in sys.path if p.endswith("site-packages") and "/.venv/" in p)
    code = (f"import sys; sys.path[:0] = [{str(ROOT)!r}, {site!r}]; from dflash_diag.cli import main; "
            f"sys.exit(main(['run', '--probes', 'queues', '--', {SYSTEM_PY!r}, '-c', {CHILD.format(root=str(ROOT))!r}]))")
    run = subprocess.Popen([SYSTEM_PY, "-c", code], user=NOBODY, group=NOBODY, cwd="/", stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env={"PATH": "/usr/bin:/bin"})
    try:
        assert run.stdout is not None
        ready = run.stdout.readline().split()
        assert ready[:1] == ["ready"], ready
        board_path = Path(ready[1])
        assert board_path.parent != squat and board_path.exists()
    finally:
        run.send_signal(signal.SIGTERM)  # forwarded to the program, which exits through atexit
        _, err = run.communicate(timeout=60)
        squat.rmdir()
        for p in squat.parent.iterdir():
            if p.name.startswith(f"dflash-diag-{NOBODY}-") and p.name not in before:
                for name in os.listdir(p):
                    if name.endswith(".json"):
                        os.unlink(p / name)
                p.rmdir()
    warning = [line for line in err.splitlines() if line.startswith("dflash-diag run: WARNING")]
    assert warning and "belongs to uid 0" in warning[0] and str(board_path.parent) in warning[0], err
    assert f"board {board_path}" in err  # the path run announces is where the board really is


def test_run_refuses_an_unsafe_explicit_board_dir_before_starting(tmp_path: Path) -> None:
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    os.chmod(open_dir, 0o777)
    marker = tmp_path / "started"
    out = subprocess.run([sys.executable, "-m", "dflash_diag", "run", "--board-dir", str(open_dir), "--",
                          sys.executable, "-c", f"open({str(marker)!r}, 'w')"],
                         capture_output=True, text=True, timeout=60, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == ExitCode.BAD_INPUT and "open to other users" in out.stderr
    assert out.stderr.count("\n") == 1 and not marker.exists()  # the program never started


def test_choose_board_dir_prefers_the_runtime_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = tmp_path / "run-user"
    runtime.mkdir(mode=0o700)
    monkeypatch.delenv("DFLASH_DIAG_BOARD_DIR", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    directory, warning = choose_board_dir()
    assert directory == runtime / "dflash-diag" and warning is None
    assert (runtime / "dflash-diag").stat().st_mode & 0o777 == 0o700
    assert (runtime / "dflash-diag", os.getuid()) in candidate_dirs(None)


# --- boards left by processes that died ---------------------------------------------------------------------


def _board_of(pid: int, ticks: int) -> bytes:
    return json.dumps({"schema": BOARD_SCHEMA, "writer": {"pid": pid, "start_time_ticks": ticks, "argv": [],
                                                          "python": "3", "torch": None, "hostname": "h"},
                       "seq": 1, "wall_time_s": 1.0, "interval_s": 1.0, "threads": {}, "probes": {}, "app": {}}).encode()


def _dead_pid() -> tuple[int, int]:
    child = subprocess.Popen(["sleep", "30"])
    ticks = None
    while ticks is None:
        ticks = proc.start_time_ticks(child.pid)
    child.kill()
    child.wait()
    return child.pid, ticks


def test_only_our_boards_of_dead_processes_are_removed(board_dir: Path, tmp_path: Path) -> None:
    dead, ticks = _dead_pid()
    me, my_ticks = os.getpid(), proc.start_time_ticks(os.getpid())
    assert my_ticks is not None
    files = {
        f"{dead}.json": _board_of(dead, ticks),  # removed: a valid board, its writer is gone
        f"{dead}.json.tmp.0a1b2c": _board_of(dead, ticks)[:9],  # removed: a half-written temporary of a dead PID
        f"{dead}.json.tmp.0a1b2d": b"half a board",  # kept: not what the probes write (test_board_tmp_cleanup.py)
        f"{me}.json": _board_of(me, my_ticks),  # kept: its writer runs
        f"{me}.json.tmp.0a1b2c": b"being written",  # kept: its writer runs
        f"{dead + 1 if dead + 1 != me else dead + 2}.json": _board_of(dead, ticks),  # kept: written by another PID
        "4194301.json": b"not a board at all",  # kept: not a board we wrote
        "notes.txt": b"the user's notes",  # kept: not a board name
        f"{me}.JSON": b"x",  # kept
    }
    for name, data in files.items():
        (board_dir / name).write_bytes(data)
    reused = _board_of(me, my_ticks + 1)  # our PID, another start time: a dead earlier process
    (board_dir / "reused").mkdir()
    target = tmp_path / "outside.json"
    target.write_bytes(_board_of(dead, ticks))
    (board_dir / "4194300.json").symlink_to(target)  # kept: a symlink is never followed nor removed
    removed = remove_stale_boards(board_dir)
    assert sorted(removed) == sorted([f"{dead}.json", f"{dead}.json.tmp.0a1b2c"])
    left = {p.name for p in board_dir.iterdir()}
    assert left == (set(files) - set(removed)) | {"reused", "4194300.json"}
    assert target.exists()
    (board_dir / f"{me}.json").write_bytes(reused)
    assert remove_stale_boards(board_dir) == [f"{me}.json"]  # reused PID: the start time tells


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to make a file owned by someone else")
def test_another_users_stale_board_is_left_alone(board_dir: Path) -> None:
    dead, ticks = _dead_pid()
    path = board_dir / f"{dead}.json"
    path.write_bytes(_board_of(dead, ticks))
    os.chown(path, 12345, 12345)
    assert remove_stale_boards(board_dir) == [] and path.exists()


@pytest.mark.slow
def test_a_sigkilled_program_leaves_no_board_forever(board_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env = {**os.environ, "DFLASH_DIAG_BOARD_DIR": str(board_dir), "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-c", CHILD.format(root=str(ROOT))], env=env, stdout=subprocess.PIPE,
                             text=True)
    assert child.stdout is not None and child.stdout.readline().startswith("ready")
    board = board_dir / f"{child.pid}.json"
    assert board.exists()
    child.send_signal(signal.SIGKILL)  # no atexit, no close: the board stays behind
    child.wait()
    assert board.exists()
    assert main(["board", "--board-dir", str(board_dir), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == [] and not board.exists()
    assert list_boards(board_dir) == []


def test_the_publisher_touches_only_its_own_board(board_dir: Path) -> None:
    from probes.board_writer import BoardPublisher

    planted = {"notes.txt": b"mine", "4194301.json": b"someone's file", f"{os.getpid()}.json.tmp.zzz": b"not hex"}
    for name, data in planted.items():
        (board_dir / name).write_bytes(data)
    publisher = BoardPublisher(board_dir)
    publisher.write({"schema": BOARD_SCHEMA})
    publisher.write({"schema": BOARD_SCHEMA})
    publisher.remove()
    assert {p.name: p.read_bytes() for p in board_dir.iterdir()} == planted


def test_top_screenshot_never_overwrites(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shot = tmp_path / "screen.svg"
    shot.write_text("<svg>an older screenshot</svg>")
    assert main(["top", "--pid", "4194301", "--screenshot", str(shot), "--duration", "1"]) == ExitCode.EXISTS
    assert "exists" in capsys.readouterr().err
    assert shot.read_text() == "<svg>an older screenshot</svg>"
