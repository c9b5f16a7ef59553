"""Fixtures: a real threaded child process (tests/snapshot/snapshot_workload.py), started and always reaped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

WORKLOAD = Path(__file__).with_name("snapshot_workload.py")
READY_TIMEOUT_S = 90.0  # generous: 2 busy cores shared with other test suites

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
        child_env = {**os.environ, "DFLASH_DIAG_BOARD_DIR": str(board_dir), **(env or {})}
        repo = str(Path(__file__).resolve().parents[2])
        child_env["PYTHONPATH"] = repo + os.pathsep + child_env.get("PYTHONPATH", "")
        proc = subprocess.Popen([sys.executable, str(WORKLOAD), *args], stdout=subprocess.PIPE, text=True,
                                env=child_env, cwd=str(WORKLOAD.parent))
        children.append(proc)
        ready = threading.Event()

        def wait_ready() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                if line.startswith("ready"):
                    ready.set()
                    return

        threading.Thread(target=wait_ready, daemon=True).start()
        if not ready.wait(READY_TIMEOUT_S):
            raise AssertionError("the workload did not become ready")
        return proc

    yield start
    for proc in children:
        if proc.poll() is None:
            try:
                os.kill(proc.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            proc.kill()
        proc.wait(timeout=30)
