"""Crafted values inside a board (boards are files another process wrote): every field the readers use, planted
with a 401-digit integer, 1e308, a wrong type, an empty container, ...: the board is refused in one line, or
every reader (`board`'s document and panels, doctor's analysis and findings, `top`'s frame and text, the exporter's
readings, the program's own alerts) takes it without an exception, a rule-error finding or a non-finite number.
And `export --all` with one such board beside a good one: the bad one costs only its own process's series."""

from __future__ import annotations

import copy
import io
import json
import math
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from dflash_contract import proc
from dflash_contract.board import BOARD_SCHEMA
from dflash_contract.readings import critical_alerts, readings
from dflash_diag.analysis import analyse
from dflash_diag.analysis.findings import evaluate
from dflash_diag.cli.board import board_document, render_board
from dflash_diag.errors import BoardError
from dflash_diag.sources.board import parse_board
from dflash_diag.view.findings import finding_json, findings_lines, headline_json, plain_lines
from dflash_diag.view.frame import build_frame
from dflash_diag.view.report import frame_to_json, frame_to_text

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "findings"))
from findings_builders import HEALTHY_APP, HEALTHY_PROBES, HEALTHY_THREADS, NOW_S, observation, pipeline

PID = os.getpid()
BIG = 10**400


def _doc() -> dict[str, Any]:
    """A board as the probes write it, every probe the readers know of in it."""
    probes: dict[str, Any] = {k: {"status": "ok", **copy.deepcopy(v)} for k, v in HEALTHY_PROBES.items()}
    probes["health"] = {"status": "ok", "steps": 10, "groups": [
        {"group": "drafter", "steps": 10, "stuck_s": 1.0, "last_step_wall_s": NOW_S - 1, "nan_steps": 0,
         "grad_norm": 1.0, "loss": 2.0}]}
    probes["collectives"] = {"status": "ok", "rank": 0, "world_size": 2, "backend": "gloo", "in_collective": None,
                             "collectives": 10}
    probes["threads"] = {"status": "ok", "dead": [{"name": "loader", "exception": "boom", "wall_s": NOW_S - 2}]}
    return {"schema": BOARD_SCHEMA,
            "writer": {"pid": PID, "start_time_ticks": proc.start_time_ticks(PID), "argv": ["python", "train.py"],
                       "python": "3.11.7", "torch": "2.13.0", "hostname": "box"},
            "seq": 1, "wall_time_s": NOW_S - 0.5, "interval_s": 1.0, "threads": {"11": "target-0", "12": "drafter-0"},
            "probes": probes, "app": copy.deepcopy(HEALTHY_APP),
            "session": {"enabled": ["gil"], "steps": 10, "step": 3, "last_step_wall_s": NOW_S - 1, "publishes": 5,
                        "publish_errors": 0, "publish_cost_ms_mean": 0.3}}


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*path, i))
    return [*out, path]


def _planted(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    doc = _doc()
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return doc


def every_reader(data: bytes, *, lay_out: bool = True) -> str:
    """What every reader does with the board; 'refused' when the reader refused it (in one line). ``lay_out``:
    rich lays the board's renderable out as text too (``render_board`` formats every value itself; the layout is
    rich's, 85% of this function's time, and where a value holds markup rich parses it then)."""
    try:
        board = parse_board(data, f"/boards/{PID}.json")
    except BoardError as exc:
        assert "\n" not in str(exc)
        return "refused"
    json.dumps(board_document(board, NOW_S), allow_nan=False)  # board --json
    rendered = render_board(board, NOW_S)  # board
    if lay_out:
        Console(file=io.StringIO(), width=120).print(rendered)
    obs = replace(observation(), boards=(board,))
    analysis = analyse(replace(obs, now_wall_s=NOW_S))  # doctor, top
    ruled = evaluate(obs, HEALTHY_THREADS, pipeline(), now_wall_s=NOW_S)  # the rules with training threads
    findings = (*analysis.findings, *ruled)
    assert not [f for f in findings if f.rule_id == "rule-error"], [dict(f.evidence) for f in findings]
    docs = [finding_json(f) for f in findings]
    json.dumps(docs, allow_nan=False)
    plain_lines(findings_lines(headline_json(analysis.headline), docs))
    frame = build_frame(obs, analysis.threads, analysis.pipeline, analysis.findings, wall_s=NOW_S, rate_hz=10.0,
                        native=False)
    json.dumps(frame_to_json(frame), allow_nan=False)  # top --batch --json
    frame_to_text(frame)  # top --batch
    assert all(math.isfinite(r.value) for r in readings(board.probes, board.session))  # export, wandb
    critical_alerts(board.probes, NOW_S)  # the program's own alerts
    return "read"


CRAFTED_VALUES = [BIG, -BIG, 2**63, 1e308, -1e308, -1, 0, "x", "", [], {}, None, True, [1e308], {"a": {}}, 5e-324,
                  10**18, [None], {"0": None}]
LEAVES = [p for p in _paths(_doc()) if p and p[0] in ("probes", "app", "session", "wall_time_s", "interval_s", "seq",
                                                      "threads")]


def test_the_seed_board_is_read_by_every_reader() -> None:
    assert every_reader(json.dumps(_doc()).encode()) == "read"
    assert len(LEAVES) > 100


@pytest.mark.slow
@pytest.mark.parametrize("value", CRAFTED_VALUES, ids=[repr(v)[:16] for v in CRAFTED_VALUES])
def test_every_field_with_every_crafted_value_is_read_or_refused(value: Any) -> None:
    """Every field the readers use (126 of them), each planted in turn: a 401-digit integer in wall_time_s crashed
    board, doctor and top (OverflowError); a status that is a list, health groups that are a number crashed too."""
    # rich lays out one board in eight, and every board a value that may be markup went into: 2,700 layouts took
    # 35 CPU-s of the suite; the boards' own formatting runs on all of them.
    markup = "[" in repr(value) or isinstance(value, str)
    outcomes = {path: every_reader(json.dumps(_planted(path, value)).encode(), lay_out=markup or i % 8 == 0)
                for i, path in enumerate(LEAVES)}
    if value in (BIG, -BIG, 2**63):
        assert set(outcomes.values()) == {"refused"}  # no number a writer produces is past 64 bits


_LEAF = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
                  st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8))
_TREE = st.recursive(_LEAF, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
                     max_leaves=10)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(LEAVES), value=_TREE)
def test_fuzzed_values_anywhere_are_read_or_refused(path: tuple[Any, ...], value: Any) -> None:
    every_reader(json.dumps(_planted(path, value)).encode())


def test_one_bad_board_costs_only_its_own_series_in_export_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One crafted board made `export --all` answer an empty reply for every process. A board no reader expected
    (a reader that raises on it) now reads dflash_up{reason="invalid"} 0; the good board beside it is served."""
    from prometheus_client import generate_latest

    from dflash_diag.export import prometheus
    from dflash_diag.export.prometheus import BoardCollector, registry_for
    from dflash_diag.model import Board

    good = parse_board(json.dumps(_doc()).encode(), f"/boards/{PID}.json")
    bad = replace(good, writer=replace(good.writer, pid=PID + 1), probes=dict(good.probes))
    real_readings = prometheus.readings

    def readings_that_break_on_bad(probes: Any, session: Any = None) -> Any:
        if probes is bad.probes:
            raise TypeError("a payload no reader expected")
        return real_readings(probes, session)

    monkeypatch.setattr(prometheus, "readings", readings_that_break_on_bad)
    collector = BoardCollector(None, board_dir=str(tmp_path))
    monkeypatch.setattr(collector, "_boards", lambda: [(None, bad), (None, good)])
    page = generate_latest(registry_for(collector)).decode()
    assert f'dflash_up{{pid="{PID + 1}",reason="invalid"}} 0.0' in page
    assert f'dflash_up{{pid="{PID}",reason=""}} 1.0' in page
    assert f'dflash_gil_contention_ratio{{hostname="box",pid="{PID}",program="reference_trainer"}}' in page
    assert f'pid="{PID + 1}",program' not in page  # none of its series, not half of them
    assert isinstance(good, Board) and collector.last.board_errors == 1
