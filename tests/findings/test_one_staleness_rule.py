"""One staleness rule for `board`, `doctor` and `top` (it was 5 s in one, 20 s in the other): a board just
under the contract's limit is fresh everywhere, one just over it is stale everywhere."""

from __future__ import annotations

import dataclasses

import pytest
from findings_builders import HEALTHY_APP, HEALTHY_PROBES, NOW_S, board, observation, pipeline

from dflash_contract.board import stale_after_s
from dflash_diag.analysis.findings import evaluate
from dflash_diag.analysis.pipeline import pipeline_view
from dflash_diag.analysis.threads import aggregate_threads
from dflash_diag.sources.board import staleness
from dflash_diag.view.text import board_age_text


@pytest.mark.parametrize("interval_s", [0.5, 1.0, 3.0])
def test_every_reader_agrees_on_stale(interval_s: float) -> None:
    limit_s = stale_after_s(interval_s)
    for age_s, expect_stale in ((limit_s - 0.5, False), (limit_s + 0.5, True)):
        b = dataclasses.replace(board(HEALTHY_PROBES, HEALTHY_APP, wall_time_s=NOW_S - age_s), interval_s=interval_s)
        obs = observation((b,), ())
        findings = evaluate(obs, (), pipeline(), now_wall_s=NOW_S)
        view = pipeline_view(obs, aggregate_threads(obs), now_wall_s=NOW_S)
        says = {
            "board": staleness(b, NOW_S) is not None,
            "top": "no update" in board_age_text(b, NOW_S),
            "doctor": any(f.rule_id == "board-stale" for f in findings),
            "pipeline": "stale" in view.verdict or "board stale" in str(view.target.batches_per_s),
        }
        assert says == dict.fromkeys(says, expect_stale), (age_s, says)
