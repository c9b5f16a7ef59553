"""Helpers for the reference trainer tests: the real CLI in a subprocess (shared by the test modules)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def cli(args: list[str], tmp_path: Path, env: dict[str, str] | None = None, timeout_s: float = 150.0
        ) -> subprocess.CompletedProcess[str]:
    """``python -m reference_trainer`` with the tiny preset defaults a test wants (no wandb, private dirs)."""
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), "DFLASH_DIAG_BOARD_DIR": str(tmp_path / "board"),
                "WANDB_MODE": "disabled", **(env or {})}
    return subprocess.run([sys.executable, "-m", "reference_trainer", *args], cwd=tmp_path, env=full_env,
                          capture_output=True, text=True, timeout=timeout_s)


def tiny_args(tmp_path: Path, *extra: str) -> list[str]:
    return ["--preset", "tiny", "--wandb", "off", "--checkpoint-dir", str(tmp_path / "ckpt"), *extra]


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
