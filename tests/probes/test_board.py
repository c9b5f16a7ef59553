"""The board: private, atomic, identifiable; the reader refuses anything corrupt, foreign or hostile."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dflash_contract.board import BOARD_SCHEMA, BoardDirError
from dflash_diag.errors import BoardError, ExitCode
from dflash_diag.sources.board import find_board, parse_board, read_board, staleness
from probes.board_writer import BoardPublisher, writer_identity


def _document(**over: object) -> dict:
    doc = {
        "schema": BOARD_SCHEMA,
        "writer": writer_identity("2.13.0+cpu"),
        "seq": 0,
        "wall_time_s": 1000.0,
        "interval_s": 1.0,
        "threads": {str(threading.get_native_id()): "MainThread"},
        "probes": {"queues": {"status": "ok", "q_hs": {"depth": 1}}, "allocator": {"status": "na", "reason": "no CUDA"}},
        "app": {"step": 3},
    }
    doc.update(over)
    return doc


def test_permissions_and_round_trip(tmp_path: Path) -> None:
    d = tmp_path / "boards"
    writer = BoardPublisher(d)
    writer.write(_document())
    assert d.stat().st_mode & 0o777 == 0o700
    assert writer.path.stat().st_mode & 0o777 == 0o600
    board = read_board(os.getpid(), d)
    assert board.writer.pid == os.getpid() and board.seq == 1
    assert board.probe("queues")["q_hs"]["depth"] == 1 and board.probe("allocator") is None
    assert board.threads[threading.get_native_id()] == "MainThread"
    assert find_board(os.getpid(), d) == (writer.path, os.getuid())
    writer.write(_document())
    assert read_board(writer.path).seq == 2  # strictly increasing
    assert [p.name for p in d.iterdir()] == [f"{os.getpid()}.json"]  # no temp files left


def test_writer_refuses_symlinked_or_open_directory(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(BoardDirError, match="symlink"):
        BoardPublisher(link)
    with pytest.raises(BoardError, match="symlink"):
        read_board(os.getpid(), link)
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    os.chmod(open_dir, 0o755)
    with pytest.raises(BoardDirError, match="other users"):
        BoardPublisher(open_dir)
    with pytest.raises(BoardError, match="chmod 700"):
        find_board(os.getpid(), open_dir)


def test_reader_refuses_symlinked_board(board_dir: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps(_document(seq=1)))
    (board_dir / f"{os.getpid()}.json").symlink_to(target)
    with pytest.raises(BoardError, match="symlink"):
        read_board(os.getpid(), board_dir)


def test_atomic_under_a_hammering_writer(board_dir: Path) -> None:
    writer = BoardPublisher(board_dir)
    writer.write(_document())
    stop = threading.Event()

    def hammer() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            writer.write(_document(app={"pad": "x" * (n % 50_000)}))

    t = threading.Thread(target=hammer)
    t.start()
    seqs = []
    try:
        for _ in range(300):
            seqs.append(read_board(writer.path).seq)  # never a partial file: always valid
    finally:
        stop.set()
        t.join(10)
    assert seqs == sorted(seqs) and seqs[-1] > seqs[0]


def test_reused_pid_and_dead_process(board_dir: Path) -> None:
    writer = BoardPublisher(board_dir)
    doc = _document()
    doc["writer"] = dict(doc["writer"], start_time_ticks=doc["writer"]["start_time_ticks"] + 1)
    writer.write(doc)
    with pytest.raises(BoardError, match="earlier process"):
        read_board(os.getpid(), board_dir)
    # a board left behind by a process that is gone
    gone = board_dir / "4194301.json"
    gone.write_text(json.dumps(_document(writer=dict(doc["writer"], pid=4194301))))
    os.chmod(gone, 0o600)
    with pytest.raises(BoardError) as info:
        read_board(gone)
    assert info.value.exit_code == ExitCode.NO_PROCESS
    assert read_board(gone, check_live=False).writer.pid == 4194301


def test_pid_in_file_must_match_the_writer(board_dir: Path) -> None:
    path = board_dir / "12345.json"
    path.write_text(json.dumps(_document()))
    with pytest.raises(BoardError, match="written by PID"):
        read_board(path)


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to make a file owned by someone else")
def test_foreign_board_is_refused(board_dir: Path) -> None:
    path = board_dir / f"{os.getpid()}.json"
    path.write_text(json.dumps(_document()))
    os.chown(path, 12345, 12345)
    with pytest.raises(BoardError, match="belongs to uid 12345"):
        read_board(os.getpid(), board_dir)


def test_huge_board_is_refused(board_dir: Path) -> None:
    path = board_dir / f"{os.getpid()}.json"
    with open(path, "wb") as f:
        f.truncate(5 * 1024 * 1024)
    with pytest.raises(BoardError, match="limit"):
        read_board(path)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "empty"),
        (json.dumps(_document())[:-40].encode(), "not valid JSON"),
        (b"\xff\xfe", "UTF-8"),
        (json.dumps(_document(schema="dflash-diag.board/2")).encode(), "schema"),
        (json.dumps(_document(seq="7")).encode(), "seq has the wrong type"),
        (json.dumps(_document(wall_time_s=True)).encode(), "wrong type"),
        (json.dumps(_document()).replace("1000.0", "NaN").encode(), "not valid JSON"),
        (json.dumps(_document(probes={"gil": {"status": "maybe"}})).encode(), "status"),
        (json.dumps(_document(probes={"gil": {"status": "na"}})).encode(), "without a reason"),
        (json.dumps(_document(threads={"abc": "x"})).encode(), "TID"),
        (b"[" * 100_000, "not valid JSON"),
        (b"[1, 2]", "not a JSON object"),
    ],
    # ids of their own: the documents carry this process's PID, which differs between pytest-xdist's workers
    ids=["empty", "cut", "not-utf8", "schema", "seq-type", "wall-type", "nan", "status", "na-reason", "tid",
         "deep", "array"],
)
def test_malformed_boards_give_one_line_errors(data: bytes, message: str) -> None:
    with pytest.raises(BoardError, match=message) as info:
        parse_board(data, "/x/1.json")
    assert "\n" not in str(info.value)


def test_staleness() -> None:
    board = parse_board(json.dumps(_document(seq=1)).encode(), "/x/1.json")
    assert staleness(board, 1001.0) is None
    assert staleness(board, 1042.0).startswith("no update for 42 s: hung?")
    stepping = parse_board(
        json.dumps(_document(session={"steps": 5, "last_step_wall_s": 900.0})).encode(), "/x/1.json"
    )
    assert "no training step for 101 s" in staleness(stepping, 1001.0)


_VALID = json.dumps(_document(seq=1)).encode()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=2000))
def test_fuzz_random_bytes(data: bytes) -> None:
    try:
        parse_board(data, "/x/1.json")
    except BoardError:
        pass


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_fuzz_mutated_valid_boards(data: st.DataObject) -> None:
    doc = json.loads(_VALID)
    # replace one field somewhere (top level, writer, a probe payload) with any JSON value, or drop it
    where = data.draw(st.sampled_from(["top", "writer", "probes", "threads"]))
    target = {"top": doc, "writer": doc["writer"], "probes": doc["probes"], "threads": doc["threads"]}[where]
    key = data.draw(st.sampled_from(sorted(target) + ["extra"]))
    if data.draw(st.booleans()):
        target.pop(key, None)
    else:
        target[key] = data.draw(_json_values)
    raw = json.dumps(doc).encode()
    cut = data.draw(st.integers(0, len(raw)))
    blob = raw if data.draw(st.booleans()) else raw[:cut]
    try:
        board = parse_board(blob, "/x/1.json")
    except BoardError:
        return
    assert board.schema == BOARD_SCHEMA and isinstance(board.seq, int)


def test_writer_recreates_a_removed_directory(tmp_path: Path) -> None:
    d = tmp_path / "boards"
    writer = BoardPublisher(d)
    writer.write(_document())
    writer.path.unlink()
    d.rmdir()
    writer.write(_document())
    assert d.stat().st_mode & 0o777 == 0o700 and read_board(writer.path).seq == 2
