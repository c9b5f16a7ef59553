"""Crafted boards: whatever lands in a board file, every reader (board, board --json, top, snapshot) answers
in one line or shows it safely; nothing crashes (RecursionError, OverflowError), nothing reaches the screen raw.

The boards here are written for live processes (this test process, or a small child) with the right start
time, so the reader gets past the identity checks and meets the crafted content itself.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from dflash_contract import proc
from dflash_contract.board import BOARD_SCHEMA, MAX_BOARD_BYTES, loads_strict
from dflash_diag.cli import main
from dflash_diag.errors import BoardError, ExitCode
from dflash_diag.sources.board import parse_board, read_board

PID = os.getpid()


def _doc(**over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema": BOARD_SCHEMA,
        "writer": {"pid": PID, "start_time_ticks": proc.start_time_ticks(PID), "argv": ["python", "train.py"],
                   "python": "3.11.7", "torch": None, "hostname": "box"},
        "seq": 1, "wall_time_s": 1000.0, "interval_s": 1.0, "threads": {str(threading.get_native_id()): "MainThread"},
        "probes": {"queues": {"status": "ok", "q_hs": {"depth": 1, "maxsize": 4}}}, "app": {"step": 3},
    }
    doc.update(over)
    return doc


def _plant(board_dir: Path, data: bytes | str, pid: int = PID) -> Path:
    path = board_dir / f"{pid}.json"
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    os.chmod(path, 0o600)
    return path


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"k": value}
    return value


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


CRAFTED: list[tuple[str, bytes]] = [
    ("empty", b""),
    ("whitespace", b"   \n"),
    ("not UTF-8", b"\xff\xfe{}"),
    ("truncated", json.dumps(_doc()).encode()[:-30]),
    ("a list", b"[1, 2, 3]"),
    ("NaN", json.dumps(_doc()).replace("1000.0", "NaN").encode()),
    ("Infinity", json.dumps(_doc()).replace("1000.0", "Infinity").encode()),
    ("1e999", json.dumps(_doc()).replace("1000.0", "1e999").encode()),
    ("-1e999 in a payload", json.dumps(_doc(app={"x": 0.5})).replace("0.5", "-1e999").encode()),
    ("huge int", json.dumps(_doc()).replace('"seq": 1', '"seq": ' + "9" * 5000).encode()),
    ("401-digit wall_time_s", json.dumps(_doc()).replace('"wall_time_s": 1000.0', '"wall_time_s": 1' + "0" * 400).encode()),
    ("401-digit integer in a payload", json.dumps(_doc()).replace('"depth": 1', '"depth": 1' + "0" * 400).encode()),
    ("1e300 in a payload", json.dumps(_doc()).replace('"depth": 1', '"depth": 1e300').encode()),
    ("probe status a list", json.dumps(_doc(probes={"gil": {"status": ["ok"]}})).encode()),
    ("20-digit pid", json.dumps(_doc()).replace(f'"pid": {PID}', '"pid": 99999999999999999999').encode()),
    ("negative interval", json.dumps(_doc(interval_s=-1)).encode()),
    ("bool seq", json.dumps(_doc(seq=True)).encode()),
    ("string wall time", json.dumps(_doc(wall_time_s="now")).encode()),
    ("threads not a dict", json.dumps(_doc(threads=["a"])).encode()),
    ("thread id not digits", json.dumps(_doc(threads={"12a": "x"})).encode()),
    ("thread name not a string", json.dumps(_doc(threads={"12": 5})).encode()),
    ("probe not an object", json.dumps(_doc(probes={"gil": 3})).encode()),
    ("probe bad status", json.dumps(_doc(probes={"gil": {"status": "sure"}})).encode()),
    ("probe na without reason", json.dumps(_doc(probes={"gil": {"status": "na"}})).encode()),
    ("app a list", json.dumps(_doc(app=[1])).encode()),
    ("session a string", json.dumps(_doc(session="x")).encode()),
    ("foreign schema", json.dumps(_doc(schema="other/1")).encode()),
    ("deep app (400)", json.dumps(_doc(app={"x": _nested(400)})).encode()),
    ("deep probe payload (40)", json.dumps(_doc(probes={"gil": {"status": "ok", "x": _nested(40)}})).encode()),
    ("brackets 100k deep", b"[" * 100_000),
    ("writer pid of another process", json.dumps(_doc(writer={**_doc()["writer"], "pid": 1})).encode()),
]


@pytest.mark.parametrize(("name", "data"), CRAFTED, ids=[c[0] for c in CRAFTED])
def test_crafted_board_is_refused_in_one_line(name: str, data: bytes, board_dir: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    _plant(board_dir, data)
    with pytest.raises(BoardError) as info:
        read_board(PID, board_dir)
    assert "\n" not in str(info.value) and info.value.exit_code == ExitCode.BAD_INPUT
    for argv in (["board", str(PID), "--board-dir", str(board_dir)], ["board", str(PID), "--board-dir", str(board_dir), "--json"]):
        code, out, err = _cli(capsys, *argv)
        assert code == ExitCode.BAD_INPUT and out == "" and err.count("\n") == 1 and "Traceback" not in err, (name, err)
    code, out, err = _cli(capsys, "board", "--board-dir", str(board_dir), "--json")  # the listing skips it
    assert code == 0 and json.loads(out) == [] and "Traceback" not in err


def test_deep_nesting_is_refused_before_any_recursion() -> None:
    with pytest.raises(ValueError, match="nested deeper"):
        loads_strict(json.dumps(_nested(400)))
    loads_strict(json.dumps(_nested(20)))  # what writers produce stays fine
    with pytest.raises(ValueError, match="out of range"):
        loads_strict("[1e999]")
    assert loads_strict('["[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[ in a string"]')  # brackets in strings don't count


def test_huge_board_is_refused_without_reading_it_all(board_dir: Path) -> None:
    path = board_dir / f"{PID}.json"
    with open(path, "wb") as fh:
        fh.truncate(MAX_BOARD_BYTES + 1)
    os.chmod(path, 0o600)
    with pytest.raises(BoardError, match="limit"):
        read_board(PID, board_dir)


def test_symlinked_board_and_directory_are_refused(board_dir: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps(_doc()))
    (board_dir / f"{PID}.json").symlink_to(target)
    with pytest.raises(BoardError, match="symlink"):
        read_board(PID, board_dir)
    (board_dir / f"{PID}.json").unlink()
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    _plant(real, json.dumps(_doc()))
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(BoardError, match="symlink"):
        read_board(PID, link)


@pytest.mark.parametrize("mode", [0o755, 0o770, 0o707, 0o701])
def test_directory_open_to_others_is_refused(tmp_path: Path, mode: int) -> None:
    d = tmp_path / "open"
    d.mkdir()
    _plant(d, json.dumps(_doc()))
    os.chmod(d, mode)
    with pytest.raises(BoardError, match="open to other users"):
        read_board(PID, d)


def test_board_that_is_a_fifo_or_directory_is_refused(board_dir: Path) -> None:
    os.mkfifo(board_dir / f"{PID}.json", 0o600)  # opening it must not block: O_NONBLOCK, then refused
    with pytest.raises(BoardError, match="not a regular file"):
        read_board(PID, board_dir)
    (board_dir / f"{PID}.json").unlink()
    (board_dir / f"{PID}.json").mkdir()
    with pytest.raises(BoardError):
        read_board(PID, board_dir)


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to make files owned by someone else")
def test_wrong_owner_of_file_or_directory_is_refused(board_dir: Path, tmp_path: Path) -> None:
    path = _plant(board_dir, json.dumps(_doc()))
    os.chown(path, 12345, 12345)
    with pytest.raises(BoardError, match="belongs to uid 12345"):
        read_board(PID, board_dir)
    os.chown(path, 0, 0)
    os.chown(board_dir, 12345, 12345)
    with pytest.raises(BoardError, match="belongs to uid 12345"):
        read_board(PID, board_dir)


def test_escapes_and_markup_in_a_board_never_reach_the_terminal(board_dir: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    evil = "\x1b[2J\x1b]0;pwned\x07[bold red]MARKUP[/bold red]\u202eevil\nforged line"
    doc = _doc(app={"note": evil, evil: 1, "config": {"name": evil}},
               threads={str(threading.get_native_id()): evil},
               writer={**_doc()["writer"], "argv": ["python", evil]},
               probes={"queues": {"status": "ok", evil: {"depth": 1}}, "gil": {"status": "na", "reason": evil}})
    _plant(board_dir, json.dumps(doc))
    for argv in (["board", str(PID), "--board-dir", str(board_dir)],
                 ["board", str(PID), "--board-dir", str(board_dir), "--json"],
                 ["board", "--board-dir", str(board_dir)]):
        code, out, err = _cli(capsys, *argv)
        assert code == 0, err
        for raw in ("\x1b", "\x07", "\u202e"):
            assert raw not in out + err, (argv, raw)
        assert not any(line.lstrip(" │|").startswith("forged line") for line in out.splitlines()), out
    shown = _cli(capsys, "board", str(PID), "--board-dir", str(board_dir), "--json")[1]
    assert "\\u001b[2J" in shown or "\\x1b[2J" in shown  # escaped visibly, not dropped
    text = _cli(capsys, "board", str(PID), "--board-dir", str(board_dir))[1]
    assert "[bold" in text  # markup printed as text, never interpreted


@pytest.mark.slow
def test_crafted_board_does_not_break_snapshot_or_top(board_dir: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """The seed: a board nested 400 deep crashed `board` and `snapshot` with RecursionError."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        while proc.start_time_ticks(child.pid) is None:
            pass
        writer = {**_doc()["writer"], "pid": child.pid, "start_time_ticks": proc.start_time_ticks(child.pid)}
        _plant(board_dir, json.dumps(_doc(writer=writer, app={"x": _nested(400)})), pid=child.pid)
        code, out, err = _cli(capsys, "snapshot", str(child.pid), "-o", str(tmp_path / "s.tar.gz"),
                              "--duration", "0.3", "--board-dir", str(board_dir))
        assert code == 0 and "Traceback" not in err and "missing: board" in err, err
        code, out, err = _cli(capsys, "top", "--pid", str(child.pid), "--batch", "--duration", "0.5",
                              "--board-dir", str(board_dir), "--json")
        assert code == 0 and "Traceback" not in err, err
        json.loads(out)
    finally:
        child.kill()
        child.wait()
    assert stat.S_IMODE((tmp_path / "s.tar.gz").stat().st_mode) == 0o600


def test_fuzzed_json_values_anywhere_never_crash_the_parser() -> None:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    leaves = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
    values = st.recursive(leaves, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
                          max_leaves=20)

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.sampled_from(["app", "session", "probes", "threads", "writer", "seq", "interval_s"]), values)
    def check(key: str, value: Any) -> None:
        text = json.dumps(_doc(**{key: value}))  # NaN and Infinity go in as JSON tokens too
        try:
            board = parse_board(text.encode(), "/x/1.json")
        except BoardError as exc:
            assert "\n" not in str(exc)
            return
        json.dumps(dict(board.app))  # what was accepted is plain, finite JSON

    check()
