"""Helpers for the reference trainer tests: the real CLI in a subprocess (shared by the test modules)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def cli(args: list[str], tmp_path: Path, env: dict[str, str] | None = None, timeout_s: float = 150.0
        ) -> subprocess.CompletedProcess[str]:
    """``python -m reference_trainer`` with the tiny preset defaults a test wants (no wandb, private dirs)."""
    return subprocess.run([sys.executable, "-m", "reference_trainer", *args], cwd=tmp_path, env=_env(tmp_path, env),
                          capture_output=True, text=True, timeout=timeout_s)


@dataclass(frozen=True)
class Run:
    """One of ``cli_at_once``'s runs: what ``cli`` takes."""

    args: list[str]
    tmp_path: Path
    env: dict[str, str] | None = None


def cli_at_once(runs: list[Run], timeout_s: float = 150.0) -> list[tuple[subprocess.CompletedProcess[str], float]]:
    """Several ``cli`` runs started together (each a process of its own, in its own directories): a test of several
    independent runs waits for the slowest, not for their sum (the trainer's startup is mostly waiting on imports
    and on a core that another test holds). Each run's result and its own seconds from start to exit, in order."""
    with ThreadPoolExecutor(max_workers=len(runs)) as pool:
        return list(pool.map(lambda run: _timed(run, timeout_s), runs))


def _timed(run: Run, timeout_s: float) -> tuple[subprocess.CompletedProcess[str], float]:
    t0 = time.monotonic()
    return cli(run.args, run.tmp_path, run.env, timeout_s), time.monotonic() - t0


def _env(tmp_path: Path, env: dict[str, str] | None) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "DFLASH_DIAG_BOARD_DIR": str(tmp_path / "board"),
            "WANDB_MODE": "disabled", **(env or {})}


def tiny_args(tmp_path: Path, *extra: str) -> list[str]:
    return ["--preset", "tiny", "--wandb", "off", "--checkpoint-dir", str(tmp_path / "ckpt"), *extra]


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
