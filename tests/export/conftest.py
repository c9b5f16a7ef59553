"""One tiny reference trainer, under its probes, shared by the end-to-end export tests of this directory."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 150.0  # torch import + model build on 2 busy cores
WARM_STEPS = 4


@dataclass(frozen=True)
class Trainer:
    pid: int
    board_dir: Path
    proc: subprocess.Popen[bytes]


def board_step(path: Path) -> int:
    try:
        app = json.loads(path.read_text()).get("app") or {}
    except (OSError, ValueError):
        return -1
    step = app.get("step")
    return step if isinstance(step, int) else -1


@pytest.fixture(scope="module")
def trainer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Trainer]:
    root = tmp_path_factory.mktemp("trainer")
    board_dir = root / "boards"
    board_dir.mkdir(mode=0o700)
    env = {**os.environ, "DFLASH_DIAG_BOARD_DIR": str(board_dir), "WANDB_MODE": "disabled", "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "reference_trainer", "--preset", "tiny", "--max-seconds", "240", "--wandb", "off",
           "--checkpoint-dir", str(root / "ckpt")]
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        board = board_dir / f"{proc.pid}.json"
        deadline = time.monotonic() + READY_TIMEOUT_S
        while board_step(board) < WARM_STEPS:
            if proc.poll() is not None:
                raise AssertionError(f"trainer exited early: {proc.stderr.read().decode()[-2000:] if proc.stderr else ''}")
            if time.monotonic() > deadline:
                raise AssertionError("trainer did not reach its warm-up steps in time")
            time.sleep(0.2)
        yield Trainer(proc.pid, board_dir, proc)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
