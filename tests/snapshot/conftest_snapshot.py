"""Fixtures: the test workload (tests/fixtures/cpu/pipeline_child.py, --light: no torch), started and always reaped."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import workload

MAX_S = 60.0  # the workload exits by itself after this

SECRETS = {
    "WANDB_API_KEY": "wandbsecretvalue0123456789abcdef",
    "HF_TOKEN": "hf_plantedHuggingFaceTokenValue123456",
    "AWS_SECRET_ACCESS_KEY": "awsSecretAccessKeyPlanted/9876543210",
    "MY_DB_PASSWORD": "dbpasswordplanted42",
}
API_KEY = "apikeyplanted-abcdef123456"
TOKEN = "cliTokenPlanted-55667788"

Spawn = Callable[..., subprocess.Popen[str]]


@pytest.fixture
def board_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "boards"
    directory.mkdir(mode=0o700)
    monkeypatch.setenv("DFLASH_DIAG_BOARD_DIR", str(directory))
    return directory


@pytest.fixture
def spawn(board_dir: Path) -> Iterator[Spawn]:
    children: list[subprocess.Popen[str]] = []

    def start(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        child_env = {"DFLASH_DIAG_BOARD_DIR": str(board_dir), **(env or {})}
        proc = workload.start("--light", *args, max_s=MAX_S, env=child_env)
        children.append(proc)
        return proc

    yield start
    for proc in children:
        workload.stop(proc)
