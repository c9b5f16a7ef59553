"""A real window of a real program (py-spy, /proc, the probes' board, the source files on disk), observed as every
command observes it, round-trips through its JSON document and is judged the same."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from workload import pipeline_child

from dflash_diag.analysis import analyse
from dflash_diag.model import Observation
from dflash_diag.observe import Target, Window, observe
from dflash_diag.observe.codec import encode_observation, read_observation

pytestmark = pytest.mark.slow


def test_a_live_window_round_trips_and_is_judged_the_same(tmp_path: Path) -> None:
    boards = tmp_path / "boards"
    boards.mkdir(mode=0o700)
    os.chmod(boards, 0o700)
    with pipeline_child("--mode", "drafter-bound", "--hog", "--probes",
                        env={"DFLASH_DIAG_BOARD_DIR": str(boards)}) as child:
        obs = observe(Target(child.pid, board_dir=str(boards)), Window(2.0))
    assert isinstance(obs, Observation)
    # Every kind of reading is there: the equality below is not of empty parts.
    assert obs.stacks and obs.proc and obs.resources and obs.source_lines and obs.code and obs.files
    assert isinstance(obs.boards, tuple) and obs.boards and obs.process is not None and obs.now_wall_s is not None
    copy = read_observation(encode_observation(obs, tool_version="test"))
    assert copy == obs
    assert analyse(copy) == analyse(obs)
    assert analyse(copy).headline is not None
