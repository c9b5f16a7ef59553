"""The liveness family (analysis/findings/liveness.py): a board that stopped updating, a process that exited."""

from __future__ import annotations

from findings_builders import (
    NOW_S,
    _one,
    _run,
)

from dflash_diag.model import Severity


def test_stale_board_on_a_live_process_says_hung() -> None:
    f = _one(_run(now=NOW_S + 120), "board-stale")
    assert "120 s" in f.claim


def test_exited_process() -> None:
    assert _one(_run(alive=False), "process-exited").severity == Severity.WARNING
