"""Per-thread aggregation and the pipeline verdict, on the recorded py-spy dumps plus planted boards."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from dflash_diag.analysis.pipeline import pipeline_view
from dflash_diag.analysis.threads import StagePatterns, aggregate_threads
from dflash_diag.model import (
    NA,
    Board,
    Observation,
    ProcThreadSample,
    StackSample,
    ThreadState,
    WriterIdentity,
)
from dflash_diag.model.board import BOARD_SCHEMA
from dflash_diag.sources.pyspy_json import load_recorded_dumps

S = ThreadState
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
WALL0 = 1_764_412_345.0
NO_BOARD = NA("no probe board")


def observation(stacks: tuple[StackSample, ...], *, boards: Any = NO_BOARD, proc: tuple = (),
                window_s: float = 3.0) -> Observation:
    return Observation(
        pid=stacks[0].pid, cmdline=("python", "train.py"), started_wall_s=WALL0, window_s=window_s,
        stacks=stacks, proc=proc, gpus=NA("no NVML"), boards=boards, process_alive=True, warnings=(),
    )


def board(seq: int, *, depth: int, maxsize: int = 64, history: list[int] | None = None, wall_s: float | None = None,
          put_share: float | None = None, get_share: float | None = None, app: dict | None = None,
          queue: str = "q_hs") -> Board:
    payload: dict[str, Any] = {"depth": depth, "maxsize": maxsize, "puts_per_s": 1.0, "gets_per_s": 0.8}
    if history is not None:
        payload["depth_history"] = history
    if put_share is not None:
        payload["put_blocked_share"] = put_share
    if get_share is not None:
        payload["get_blocked_share"] = get_share
    return Board(
        schema=BOARD_SCHEMA,
        writer=WriterIdentity(pid=1, start_time_ticks=5, argv=("python",), python="3.11", torch="2.13", hostname="h"),
        seq=seq, wall_time_s=wall_s if wall_s is not None else WALL0 + seq * 0.5, interval_s=0.5,
        threads={}, probes={"queues": {"status": "ok", queue: payload}},
        app=app if app is not None else {}, path="/tmp/1.json",
    )


def test_aggregate_drafter_bound_recording() -> None:
    stacks = load_recorded_dumps(FIXTURES / "cpu" / "pyspy_drafter_bound.json")
    threads = aggregate_threads(observation(stacks))
    names = [t.name for t in threads]
    assert names[:2] == ["target-0", "drafter-0"]  # stages first, then the rest
    assert set(names) == {"target-0", "drafter-0", "gil-hog", "MainThread"}
    by = {t.name: t for t in threads}
    assert by["target-0"].stage == "target" and by["drafter-0"].stage == "drafter"
    assert by["gil-hog"].stage == "other"
    for t in threads:
        assert t.n_samples == len(stacks) == len(t.timeline) == len(t.timeline_s)
        assert t.timeline_s == tuple(s.monotonic_s for s in stacks)
        assert math.isclose(sum(t.shares.values()), 1.0)
        assert isinstance(t.cpu_pct, NA)  # no /proc readings in this observation
    assert by["target-0"].shares[S.QUEUE_PUT] >= 0.75
    assert by["gil-hog"].gil_held_pct >= 60.0
    assert by["MainThread"].top_frame is not None and by["MainThread"].top_frame.name == "Condition.wait"
    assert by["gil-hog"].top_frame is not None and by["gil-hog"].top_frame.name == "gil_hog"


def test_timeline_is_in_time_order() -> None:
    stacks = load_recorded_dumps(FIXTURES / "cpu" / "pyspy_target_bound.json")
    shuffled = tuple(reversed(stacks))
    a = {t.name: t.timeline for t in aggregate_threads(observation(stacks))}
    b = {t.name: t.timeline for t in aggregate_threads(observation(shuffled))}
    assert a == b


def test_cpu_pct_from_proc_deltas_and_gpu_from_board() -> None:
    stacks = load_recorded_dumps(FIXTURES / "cpu" / "pyspy_target_bound.json")
    tid = next(t.os_thread_id for t in stacks[0].threads if t.name == "target-0")

    def sweep(at_s: float, run_ns: int) -> tuple[ProcThreadSample, ...]:
        return (ProcThreadSample(tid=tid, comm="python", state="R", utime_s=0, stime_s=0, run_ns=run_ns,
                                 runq_wait_ns=0, monotonic_s=at_s),)

    b = replace(board(1, depth=0), app={"threads": {"target-0": {"role": "target", "device": "cuda:1"},
                                                     "drafter-0": {"role": "drafter", "device": 0}}})
    obs = observation(stacks, proc=(sweep(10.0, 0), sweep(11.0, 400_000_000), sweep(12.0, 1_500_000_000)),
                      boards=(b,))
    by = {t.name: t for t in aggregate_threads(obs)}
    assert by["target-0"].cpu_pct == pytest.approx(75.0)
    assert by["target-0"].gpu_index == 1
    assert by["drafter-0"].gpu_index == 0
    assert by["drafter-1"].gpu_index is None
    assert isinstance(by["drafter-1"].cpu_pct, NA)


def test_stage_patterns_are_configurable() -> None:
    stacks = load_recorded_dumps(FIXTURES / "cpu" / "pyspy_drafter_bound.json")
    patterns = StagePatterns.parse(target="gil-*", drafter="drafter-*,Main*")
    by = {t.name: t.stage for t in aggregate_threads(observation(stacks), patterns)}
    assert by == {"gil-hog": "target", "drafter-0": "drafter", "MainThread": "drafter", "target-0": "other"}
    assert StagePatterns.parse(None, "") == StagePatterns()


def test_verdict_drafter_bound_from_stacks_alone() -> None:
    obs = observation(load_recorded_dumps(FIXTURES / "cpu" / "pyspy_drafter_bound.json"))
    view = pipeline_view(obs, aggregate_threads(obs))
    assert view.bottleneck == "drafter"
    assert view.verdict.startswith("drafter-bound: targets blocked in put")
    assert isinstance(view.queue_depth, NA) and "no probe board" in view.queue_depth.reason
    assert isinstance(view.target.batches_per_s, NA)
    assert view.producer_starved_share >= 0.75  # type: ignore[operator]


def test_verdict_target_bound_from_stacks_alone() -> None:
    obs = observation(load_recorded_dumps(FIXTURES / "cpu" / "pyspy_target_bound.json"))
    view = pipeline_view(obs, aggregate_threads(obs))
    assert view.bottleneck == "target"
    assert view.verdict.startswith("target-bound: drafters wait in get")
    assert "targets never block in put" in view.verdict
    assert view.target.threads == ("target-0",) and view.drafter.threads == ("drafter-0", "drafter-1")
    assert view.drafter.shares[S.QUEUE_GET] >= 0.75


def test_verdict_with_queue_probe_rising() -> None:
    stacks = load_recorded_dumps(FIXTURES / "cpu" / "pyspy_drafter_bound.json")
    boards = tuple(board(i, depth=40 + i, history=list(range(30, 41 + i)),
                         app={"target_batches_per_s": 0.38, "drafter_batches_per_s": 0.31, "tokens_per_s": 21500.0})
                   for i in range(12))
    obs = observation(stacks, boards=boards)
    view = pipeline_view(obs, aggregate_threads(obs), now_wall_s=WALL0 + 6.0)
    assert view.queue_name == "q_hs"
    assert view.queue_depth == 51 and view.queue_maxsize == 64
    assert view.queue_depth_history[-1] == 51
    assert view.queue_trend_per_s == pytest.approx(2.0)  # one item per 0.5 s publish
    assert view.target.batches_per_s == 0.38 and view.drafter.tokens_per_s == 21500.0
    assert view.bottleneck == "drafter"
    assert view.verdict.startswith("drafter-bound: q_hs 51/64 rising +2.0/s, targets blocked in put")
    assert "drafters never wait" in view.verdict


def test_probe_shares_win_over_sampled_ones_and_only_queue_is_used() -> None:
    stacks = load_recorded_dumps(FIXTURES / "cpu" / "pyspy_target_bound.json")
    boards = tuple(board(i, depth=1, history=[1] * 5, put_share=0.0, get_share=0.62, queue="hidden")
                   for i in range(4))
    obs = observation(stacks, boards=boards)
    view = pipeline_view(obs, aggregate_threads(obs), now_wall_s=WALL0 + 2.0)
    assert view.queue_name == "hidden"  # the only registered queue
    assert view.consumer_starved_share == 0.62
    assert view.bottleneck == "target"
    assert "drafters wait in get 62% of the time (probe)" in view.verdict


def test_stale_board_is_not_trusted() -> None:
    stacks = load_recorded_dumps(FIXTURES / "cpu" / "pyspy_target_bound.json")
    obs = observation(stacks, boards=(board(1, depth=63, app={"tokens_per_s": 100.0}),))
    view = pipeline_view(obs, aggregate_threads(obs), now_wall_s=WALL0 + 120.0)
    assert isinstance(view.queue_depth, NA) and "stale" in view.queue_depth.reason
    assert isinstance(view.target.tokens_per_s, NA) and "stale" in view.target.tokens_per_s.reason
    assert view.bottleneck == "target"  # still judged from the stacks


def test_balanced_and_unknown() -> None:
    stacks = load_recorded_dumps(FIXTURES / "cpu" / "pyspy_ckpt_compile.json")
    no_stage = StagePatterns(target=("nope-*",), drafter=("none-*",))
    obs = observation(stacks)
    view = pipeline_view(obs, aggregate_threads(obs, no_stage))
    assert view.bottleneck == "unknown" and view.verdict.startswith("unknown:")
    half = tuple(board(i, depth=32, history=[32] * 6, put_share=0.01, get_share=0.01) for i in range(6))
    view = pipeline_view(observation(stacks, boards=half), aggregate_threads(obs, no_stage), now_wall_s=WALL0 + 3)
    assert view.bottleneck == "balanced"
    assert view.verdict == (
        "balanced: q_hs 32/64 steady, producers never block in put (probe), consumers never wait (probe)"
    )


def test_board_roles_place_threads_the_patterns_miss() -> None:
    stacks = load_recorded_dumps(FIXTURES / "cpu" / "pyspy_drafter_bound.json")
    roles = {"gil-hog": {"role": "drafter", "device": "cuda:0"}, "MainThread": {"role": "sequential"}}
    obs = observation(stacks, boards=(replace(board(1, depth=0), app={"threads": roles}),))
    by = {t.name: t.stage for t in aggregate_threads(obs)}
    assert by == {"target-0": "target", "drafter-0": "drafter", "gil-hog": "drafter", "MainThread": "other"}


def test_queue_not_found_names_the_watched_ones() -> None:
    stacks = load_recorded_dumps(FIXTURES / "cpu" / "pyspy_target_bound.json")
    two = replace(board(1, depth=3), probes={"queues": {"status": "ok", "a": {"depth": 1}, "b": {"depth": 2}}})
    view = pipeline_view(observation(stacks, boards=(two,)), (), now_wall_s=WALL0 + 1)
    assert isinstance(view.queue_depth, NA) and view.queue_depth.reason == "no `q_hs` among the watched queues (a, b)"
    none = replace(board(1, depth=3), probes={})
    view = pipeline_view(observation(stacks, boards=(none,)), (), now_wall_s=WALL0 + 1)
    assert isinstance(view.queue_depth, NA) and "no queues probe" in view.queue_depth.reason


def test_every_pane_uses_the_window_not_the_newest_board() -> None:
    """issue 14: the stage line said "put-wait 6% (probe)" (the newest 0.5 s) while the thread rows said 22%
    (30 s), and the trend said "backing up" while the verdict said "steady". Now the probe's shares are averaged
    over the window's boards, the depth history is cut to the window, and one word names the trend."""
    stacks = load_recorded_dumps(FIXTURES / "cpu" / "pyspy_drafter_bound.json")
    shares = [0.30] * 9 + [0.06]  # the newest board's 0.5 s happens to be quiet
    boards = tuple(board(i, depth=40, history=list(range(200)), put_share=s, get_share=0.0) for i, s in enumerate(shares))
    obs = observation(stacks, boards=boards, window_s=5.0)
    view = pipeline_view(obs, aggregate_threads(obs), now_wall_s=WALL0 + 5.5)
    assert view.producer_starved_share == pytest.approx(0.276)  # (9 * 0.30 + 0.06) / 10
    assert view.probe_boards == 10
    assert not isinstance(view.producer_starved_sampled, NA)  # the stacks' own figure, kept alongside
    assert view.producer_starved_sampled == pytest.approx(
        next(t for t in aggregate_threads(obs) if t.name == "target-0").shares[S.QUEUE_PUT])
    assert len(view.queue_depth_history) == 10  # 5 s of 0.5 s publishes, not the probe's 200 points
    assert view.queue_trend == "steady" and "steady" in view.verdict


@pytest.mark.parametrize(("slope", "word"), [(0.07, "steady"), (0.1, "rising"), (-0.3, "falling")])
def test_trend_word_is_the_verdicts(slope: float, word: str) -> None:
    from dflash_diag.analysis.pipeline import trend_word

    assert trend_word(slope) == word
    assert trend_word(NA("no queue probe")) == ""
