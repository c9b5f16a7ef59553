"""The reference trainer under `dflash-diag run`: a healthy tiny run leaves a quiet board; the flipped
use_reentrant flag shows at the trainer's real checkpoint call sites."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dflash_contract.board import AppKeys
from dflash_diag.sources.board import read_board

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def _train(tmp_path: Path, board_dir: Path, *extra: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("DFLASH_DIAG_BOARD_DIR", None)
    proc = subprocess.run(
        [sys.executable, "-m", "dflash_diag", "run", "--keep-board", "--board-dir", str(board_dir), "--",
         sys.executable, "-m", "reference_trainer", "--preset", "tiny", "--max-steps", "4", "--wandb", "off",
         "--checkpoint-dir", str(tmp_path / "ckpt"), *extra],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    boards = list(board_dir.glob("*.json"))
    assert len(boards) == 1
    board = read_board(boards[0], check_live=False)  # kept after exit: the final publish
    assert board.final
    return json.loads(boards[0].read_text())


def test_healthy_tiny_run_is_quiet(tmp_path: Path, board_dir: Path) -> None:
    board = _train(tmp_path, board_dir)
    assert board["writer"]["torch"].startswith("2.")  # torch imported after the bootstrap started the probes
    probes = board["probes"]
    assert probes["allocator"] == {"status": "na", "reason": "no CUDA"}
    ck = probes["checkpoint"]
    assert ck["calls"]["reentrant"] == 0 and ck["calls"]["non_reentrant"] > 0
    assert ck["grad_none_count"] == 0 and ck["checked_backward_steps"] >= 1 and ck["trainable_params"] > 0
    assert probes["codedrift"]["stale"] == []
    compile_ = probes["compile"]
    assert compile_["recompiles"] == 0 and compile_["graph_breaks"] == 0 and compile_["recompile_limit_hits"] == 0
    assert probes["cudagraphs"]["skips"] == 0
    q = probes["queues"]["q_hs"]
    assert q["maxsize"] > 0 and q["instrumented"]
    assert probes["fastpath"]["fallback"] is True  # CPU: GatedDeltaNet on the torch fallback, and said so
    assert all(v == "torch_fallback" for v in probes["fastpath"]["gdn_kernels"].values())
    assert probes["gil"]["status"] == "ok"
    # which probe's hook failed, and how, when one did (a load-dependent failure once, 2026-12-06, unexplained)
    assert all(p.get("hook_errors", 0) == 0 for p in probes.values()), {
        name: (p.get("hook_errors"), p.get("last_hook_error")) for name, p in probes.items() if p.get("hook_errors")}
    # The trainer publishes its app section by name, as any program would: the names the readers know (AppKeys).
    app = board["app"]
    assert {AppKeys.NAME, AppKeys.STEP, AppKeys.TOKENS_PER_S, AppKeys.TARGET_BATCHES_PER_S, AppKeys.DRAFTER_BATCHES_PER_S,
            AppKeys.STEP_MS, AppKeys.CONFIG, AppKeys.THREADS, AppKeys.SCENARIO} <= set(app), sorted(app)
    assert {row[AppKeys.ROLE] for row in app[AppKeys.THREADS].values()} >= {"target", "drafter"}
    assert all(row[AppKeys.DEVICE] == "cpu" for row in app[AppKeys.THREADS].values())


def test_reentrant_flag_shows_at_the_trainer_call_sites(tmp_path: Path, board_dir: Path) -> None:
    ck = _train(tmp_path, board_dir, "--use-reentrant", "true")["probes"]["checkpoint"]
    assert ck["calls"]["non_reentrant"] == 0 and ck["calls"]["reentrant"] > 0, ck  # the payload says why if not
    assert {s["site"].split(":")[0] for s in ck["sites"]} >= {"reference_trainer/drafter.py"}
    assert all(s["use_reentrant"] is True for s in ck["sites"])
