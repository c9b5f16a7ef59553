"""The session: publishes at most 2 Hz, on its own when there are no steps, survives failing probes."""

from __future__ import annotations

import os
import queue
import time
from pathlib import Path

import pytest

import probes
from dflash_diag.sources.board import read_board


def _wait_for(predicate, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.05)


def test_watch_queue_by_name_reaches_the_board(session_factory, board_dir: Path) -> None:
    s = session_factory("queues", "gil")
    q = queue.Queue(maxsize=8)
    assert s.watch_queue("q_hs", q) is q
    q.put(1)
    s.set_app(name="reference_trainer", step=3, tokens_per_s=12.5,
              config={"lr": 3e-4, "bad": float("nan"), "wandb_api_key": "abc", "hub": "hf_AbCdEfGhIjKlMn", "token": None})
    s.step(3)
    assert s.publish()
    board = read_board(os.getpid(), board_dir)
    assert board.probe("queues")["q_hs"]["depth"] == 1
    assert board.probe("queues")["q_hs"]["maxsize"] == 8
    assert board.app["name"] == "reference_trainer" and board.app["config"]["bad"] is None
    assert board.app["config"]["wandb_api_key"] == "<redacted>" and board.app["config"]["hub"] == "<redacted>"
    assert board.app["config"]["token"] is None and board.app["config"]["lr"] == 3e-4
    assert board.app["tokens_per_s"] == 12.5
    assert board.session["step"] == 3 and board.session["steps"] == 1
    assert set(board.probes) == {"queues", "gil"}
    assert board.writer.argv  # redacted argv of this process


def test_publishes_at_most_every_publish_interval(session_factory, board_dir: Path) -> None:
    s = session_factory("queues", publish_interval_s=0.5, timer_interval_s=1.0)
    before = s.publishes
    t0 = time.monotonic()
    while time.monotonic() - t0 < 1.5:
        s.step()
        time.sleep(0.001)
    assert s.publishes - before <= 4  # <= 2 Hz (+1 for timing edges)


def test_timer_publishes_without_steps(session_factory, board_dir: Path) -> None:
    session_factory("queues", publish_interval_s=0.2, timer_interval_s=0.2)
    first = read_board(os.getpid(), board_dir).seq
    _wait_for(lambda: read_board(os.getpid(), board_dir).seq >= first + 2)


def test_a_failing_probe_is_reported_and_never_raises(session_factory, board_dir: Path) -> None:
    s = session_factory("queues", "codedrift")

    def boom(now_s: float) -> dict:
        raise RuntimeError("planted failure")

    s._slots["codedrift"].probe.snapshot = boom
    for _ in range(7):
        s.publish()
    board = read_board(os.getpid(), board_dir)
    assert board.probes["codedrift"]["status"] == "error"
    assert "planted failure" in board.probes["codedrift"]["reason"]
    assert board.probes["codedrift"]["errors"] == 5  # switched off after 5 in a row
    assert board.probe("queues") is not None


def test_disabled_probes_are_no_ops(session_factory) -> None:
    s = session_factory()
    q = queue.Queue()
    assert s.watch_queue("q_hs", q) is q and type(q) is queue.Queue
    s.watch_model("m", object())
    s.step(1)


def test_close_removes_the_board_unless_kept(session_factory, board_dir: Path) -> None:
    s = session_factory("queues")
    path = Path(s.board_path)
    assert path.exists()
    s.close()
    assert not path.exists()
    s.close()  # idempotent
    kept = session_factory("queues", keep_board=True)
    kept.close()
    assert Path(kept.board_path).exists()
    assert read_board(Path(kept.board_path)).final is True


def test_unsafe_board_dir_does_not_break_the_program(tmp_path: Path, capsys) -> None:
    from probes.session import ProbeSession

    bad = tmp_path / "open"
    bad.mkdir()
    os.chmod(bad, 0o777)
    s = ProbeSession(probes.ProbesConfig(enabled=frozenset({"queues"}), board_dir=str(bad)))
    try:
        assert s.board_path is None and "other users" in s.board_error
        s.step(1)
        assert "WARNING: the probes are on but NO BOARD will be written" in capsys.readouterr().err
    finally:
        s.close()


def test_probe_list_parsing() -> None:
    assert probes.parse_probe_list("all") == probes.ALL_PROBES
    assert probes.parse_probe_list("none") == frozenset()
    assert probes.parse_probe_list("all,-gil") == probes.ALL_PROBES - {"gil"}
    assert probes.parse_probe_list("gil, queues") == {"gil", "queues"}
    with pytest.raises(ValueError, match="unknown probe 'gli'"):
        probes.parse_probe_list("gli")


def test_a_session_that_discovers_finds_a_queue_made_after_it_started(session_factory, board_dir: Path) -> None:
    """`dflash-diag run` starts the probes before the program runs a line: a queue the program makes later (and
    never registers) is found by looking at its threads' frames again (probes/discover.py), as attach finds it."""
    s = session_factory("queues", discover=True, timer_interval_s=0.5, publish_interval_s=0.25)
    batches: queue.Queue = queue.Queue(maxsize=4)  # made after the session started, held by this frame
    batches.put(1)
    _wait_for(lambda: "batches" in (read_board(os.getpid(), board_dir).probe("queues") or {}), timeout_s=15.0)
    assert read_board(os.getpid(), board_dir).probe("queues")["batches"]["maxsize"] == 4
    assert s.discovered_queues == ["batches"] and s.discover_cost_s < 0.5


def test_a_session_the_program_started_does_not_look_for_queues(session_factory, board_dir: Path) -> None:
    s = session_factory("queues", timer_interval_s=0.5, publish_interval_s=0.25)  # discover: False, the default
    batches: queue.Queue = queue.Queue(maxsize=4)
    time.sleep(1.6)
    assert s.publish()
    assert "batches" not in read_board(os.getpid(), board_dir).probe("queues") and batches.maxsize == 4
