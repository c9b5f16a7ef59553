"""top's history: tok/s, q_hs depth and per-GPU utilisation over the last minutes, folded in frame by frame and
drawn on a linear time axis, so a drop shows as a drop where it happened."""

from __future__ import annotations

from dataclasses import replace

from test_top_app import run, screen_text
from textual.pilot import Pilot
from textual.widgets import Sparkline
from top_fakes import FROZEN_WALL_S, GPUS, PIPELINE, make_frame

from dflash_diag.model import NA
from dflash_diag.tui.app import TopApp
from dflash_diag.tui.widgets import history_values
from dflash_diag.view.frame import TopFrame
from dflash_diag.view.history import EMPTY_HISTORY, History, Series, buckets, extend


def _frame(t_s: float, tokens: float | None, depth: int | None, util: float | None = None) -> TopFrame:
    drafter = replace(PIPELINE.drafter, tokens_per_s=tokens if tokens is not None else NA("no board"))
    target = replace(PIPELINE.target, tokens_per_s=NA("no board"))
    pipeline = replace(PIPELINE, drafter=drafter, target=target,
                       queue_depth=depth if depth is not None else NA("no queue probe"))
    gpus = tuple(replace(g, util_pct=util) for g in GPUS) if util is not None else NA("no NVML")
    return make_frame(wall_s=FROZEN_WALL_S + t_s, pipeline=pipeline, gpus=gpus)


def _fold(frames: list[TopFrame], history: History = EMPTY_HISTORY) -> History:
    for frame in frames:
        history = extend(history, frame)
    return history


def test_extend_keeps_the_horizon_and_leaves_gaps_for_missing_readings() -> None:
    frames = [_frame(t, 9000.0, 4, 95.0) for t in range(0, 400, 10)]
    frames.append(_frame(400, None, 2, None))  # no tok/s, no GPU this time: a gap, not a zero
    history = _fold(frames, History(horizon_s=300.0))
    tokens = history.get("tok/s")
    assert tokens is not None and tokens.points[0][0] == FROZEN_WALL_S + 100 and tokens.points[-1][0] == FROZEN_WALL_S + 390
    assert history.get("q_hs depth").points[-1] == (FROZEN_WALL_S + 400, 2.0)
    assert [s.name for s in history.series] == ["tok/s", "q_hs depth", "GPU 0 util %", "GPU 1 util %"]
    assert extend(history, frames[-1]) is history  # the same frame twice adds nothing
    assert EMPTY_HISTORY.series == ()


def test_a_drop_lands_in_the_bucket_of_its_time() -> None:
    points = tuple((FROZEN_WALL_S + t, 9000.0 if t < 60 else 3000.0) for t in range(0, 120, 2))
    series = Series("tok/s", points)
    values = buckets(series, FROZEN_WALL_S + 120, 120.0, 12)
    assert values[:6] == [9000.0] * 6 and values[6:] == [3000.0] * 6
    sparse = Series("tok/s", ((FROZEN_WALL_S + 10, 5.0), (FROZEN_WALL_S + 100, 7.0)))
    assert buckets(sparse, FROZEN_WALL_S + 120, 120.0, 12) == [None, 5.0, *([None] * 8), 7.0, None]
    # the chart starts at the first reading and repeats the last one across empty columns
    assert history_values(sparse, FROZEN_WALL_S + 120, 120.0, 12) == [5.0] * 9 + [7.0, 7.0]


def test_history_tab_shows_the_drop() -> None:
    frames = [_frame(t, 9000.0 if t < 120 else 2500.0, 4 if t < 120 else 0, 97.0 if t < 120 else 10.0)
              for t in range(0, 240, 2)]
    history = _fold(frames)
    frame = replace(frames[-1], history=history)

    async def body(app: TopApp, pilot: Pilot[int]) -> None:
        await pilot.press("6")
        await pilot.pause()
        text = screen_text(app)
        assert "tok/s" in text and "now    2,500" in text and "min 2,500  max 9,000" in text
        assert "q_hs depth" in text and "GPU 0 util %" in text and "GPU 1 util %" in text
        assert "last 3 min 58 s" in text
        data = list(app.query_one("#history-spark-tokens", Sparkline).data or [])
        half = len(data) // 2
        assert len(data) > 20 and min(data[: half - 1]) == 9000.0 and max(data[half + 1 :]) == 2500.0
        gpu = list(app.query_one("#history-spark-gpu0", Sparkline).data or [])
        assert gpu[0] == 97.0 and gpu[-1] == 10.0

    run(body, frame=frame)


def test_history_tab_says_why_a_series_is_missing() -> None:
    frame = _frame(0, None, None, None)
    frame = replace(frame, history=extend(EMPTY_HISTORY, frame))

    async def body(app: TopApp, pilot: Pilot[int]) -> None:
        await pilot.press("6")
        await pilot.pause()
        text = screen_text(app)
        assert "tok/s: N/A: the program publishes no tokens_per_s" in text
        assert "q_hs depth: N/A: no watched queue" in text
        assert "GPUs: N/A: no NVML" in text

    run(body, frame=frame, size=(100, 30))
