"""`<pid>.json.tmp.*` files are removed only when they hold what the probes' publisher writes for that PID
(whole or cut short, empty included) and that writer is gone; anything else under such a name stays
(docs/board.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dflash_contract import proc
from dflash_contract.board import BOARD_SCHEMA, remove_stale_boards
from dflash_diag.cli import main

ROOT = Path(__file__).resolve().parents[2]

# A real probes session whose publisher dies (os._exit, as SIGKILL would) after writing CUT bytes of its next
# temporary (-1: after writing and fsyncing all of it, before the rename).
DYING = """
import os, sys, time
sys.path.insert(0, {root!r})
import probes
cut = int(sys.argv[1])
s = probes.start(probes.ProbesConfig(enabled=frozenset({{"queues"}}), publish_interval_s=0.2))
real_write, real_replace = os.write, os.replace
def write(fd, data):
    if cut >= 0:
        if cut:
            real_write(fd, bytes(data[:cut]))
        os._exit(9)
    return real_write(fd, data)
def replace(src, dst):
    os._exit(9)
os.write = write
if cut < 0:
    os.replace = replace
time.sleep(30)
"""


def _left_by_a_dying_writer(board_dir: Path, cut: int) -> tuple[int, str]:
    env = {**os.environ, "DFLASH_DIAG_BOARD_DIR": str(board_dir), "PYTHONPATH": str(ROOT)}
    child = subprocess.run([sys.executable, "-c", DYING.format(root=str(ROOT)), str(cut)], env=env, timeout=60)
    assert child.returncode == 9
    pid = next(int(p.name.split(".")[0]) for p in board_dir.iterdir() if ".json.tmp." in p.name)
    assert not proc.process_alive(pid)
    tmp = next(p.name for p in board_dir.iterdir() if p.name.startswith(f"{pid}.json.tmp."))
    return pid, tmp


@pytest.mark.slow
@pytest.mark.parametrize("cut", [0, 12, 60, 400, -1],
                         ids=["empty", "cut in the schema", "cut in the writer", "cut later", "whole, not renamed"])
def test_a_dead_publishers_temporary_is_removed(cut: int, board_dir: Path) -> None:
    pid, tmp = _left_by_a_dying_writer(board_dir, cut)
    data = (board_dir / tmp).read_bytes()
    assert len(data) == cut if cut >= 0 else json.loads(data)["writer"]["pid"] == pid
    assert tmp in remove_stale_boards(board_dir)
    assert not (board_dir / tmp).exists()


@pytest.mark.slow
def test_other_content_under_a_dead_pids_temporary_name_stays(board_dir: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    pid, tmp = _left_by_a_dying_writer(board_dir, 60)  # a real dead writer: its PID names the planted files
    me, my_ticks = os.getpid(), proc.start_time_ticks()
    assert my_ticks is not None

    def ours(writer_pid: int, ticks: int) -> bytes:  # the publisher's format, cut after the writer's argv
        return f'{{"schema":"{BOARD_SCHEMA}","writer":{{"pid":{writer_pid},"start_time_ticks":{ticks},"argv":['.encode()

    planted = {
        f"{pid}.json.tmp.aaaaaa": (b"half a board", False),  # not what the probes write
        f"{pid}.json.tmp.bbbbbb": (b'{"schema": "dflash-diag.board/1"}', False),  # another writer's format
        f"{pid}.json.tmp.cccccc": (ours(pid + 1, 1), False),  # another PID's
        f"{pid}.json.tmp.dddddd": (b"\x00" * 10, False),
        f"{me}.json.tmp.eeeeee": (ours(me, my_ticks), False),  # a live writer's
        f"{me}.json.tmp.ffffff": (ours(me, my_ticks + 1), True),  # our PID, reused
    }
    for name, (data, _) in planted.items():
        (board_dir / name).write_bytes(data)
    # The listing is what removes them (and the board the dead writer left).
    assert main(["board", "--board-dir", str(board_dir), "--json"]) == 0
    capsys.readouterr()
    left = {p.name for p in board_dir.iterdir()}
    assert left == {name for name, (_, gone) in planted.items() if not gone}
    assert tmp not in left
