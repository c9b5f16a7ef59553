"""``top`` of a job: one row per rank above the selected rank's threads, [ and ] pick the rank, the findings pane
holds the job's findings; ``top --batch`` of a job (text and JSON). Real Textual, frames from the analysis of recorded
ranks (tests/fixtures/jobs)."""

from __future__ import annotations

import asyncio
import threading

from job_fixtures import load_job
from textual.widgets import DataTable

from dflash_diag.analysis import analyse
from dflash_diag.cli.top_live import batch_document, batch_lines, frame_of, job_frame, rank_frames
from dflash_diag.model.job import JobAnalysis
from dflash_diag.observe.live import live_rank_config
from dflash_diag.sources.config import SamplerConfig
from dflash_diag.tui.app import TopApp
from dflash_diag.view.frame import TopFrame


class JobSource:
    """The job live source's contract over one analysed window: select_rank re-frames, as the real one does."""

    def __init__(self, analysis: JobAnalysis) -> None:
        self.analysis = analysis
        self.frames = rank_frames(analysis, native=False)
        self.selected = 0
        self.pid = 4242
        self.rate_hz: float | None = None
        self.lock = threading.Lock()

    def select_rank(self, step: int) -> int:
        with self.lock:
            self.selected = (self.selected + step) % len(self.frames)
            return self.selected

    def poll(self) -> TopFrame:
        return job_frame(self.analysis, self.frames, self.selected)

    def set_rate(self, rate_hz: float | None) -> float | None:
        self.rate_hz = rate_hz
        return rate_hz

    def set_native(self, native: bool) -> bool:
        return native

    def write_snapshot(self) -> str:
        return "/tmp/none"

    def close(self) -> None:
        pass


def _text(app: TopApp) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def _threads(app: TopApp) -> list[str]:
    table = app.query_one("#threads", DataTable)
    return [str(table.get_row(row.key)[0]) for row in table.ordered_rows]


def test_the_ranks_show_and_brackets_pick_whose_threads() -> None:
    source = JobSource(analyse(load_job("ddp_thread_died")))
    app = TopApp(source, initial_frame=source.poll(), start_sampler=True, refresh_s=0.3)
    seen: dict[str, object] = {}

    async def main() -> None:
        async with app.run_test(size=(150, 50)) as pilot:
            await pilot.pause()
            seen["first"] = _text(app)
            seen["threads0"] = _threads(app)
            for _ in range(2):
                await pilot.press("right_square_bracket")
            for _ in range(40):  # the sampler thread polls again and the frame of rank 2 arrives
                await pilot.pause(0.05)
                if app.frame is not None and app.frame.job is not None and app.frame.job.selected == 2:
                    break
            seen["selected"] = app.frame.job.selected if app.frame is not None and app.frame.job else None
            seen["threads2"] = _threads(app)
            await pilot.press("5")
            await pilot.pause()
            seen["findings"] = _text(app)

    asyncio.run(main())
    first = str(seen["first"])
    assert "job of launcher PID" in first and "3 rank(s)" in first
    assert "> 0 " in first and "stuck" in first and "all_reduce at Trainer.run (worker_train.py:" in first
    assert "trainer" in seen["threads0"]  # rank 0's training thread is alive
    assert seen["selected"] == 2
    assert "trainer" not in seen["threads2"]  # rank 2's died
    assert "the job is hung in a collective" in str(seen["findings"])


def test_batch_of_a_job_has_the_rows_the_findings_and_every_ranks_frame() -> None:
    analysis = analyse(load_job("ddp_straggler"))
    frame = frame_of(analysis, native=False)
    doc = batch_document(analysis, frame)
    assert doc["kind"] == "job" and doc["headline"]["rule_id"] == "rank-straggler"
    assert [r["rank"] for r in doc["job"]["ranks"]] == [0, 1, 2, 3]
    assert doc["job"]["ranks"][1]["collective"]["op"] == "all_reduce"
    assert [r["frame"]["pid"] for r in doc["ranks"]] == [r["pid"] for r in doc["job"]["ranks"]]
    assert all(r["frame"]["threads"] for r in doc["ranks"])
    text = batch_lines(analysis, frame)
    assert "RANKS" in text and "rank 0 is the straggler" in text and text.count("=====") == 8


def test_the_live_view_shares_its_budget_between_the_ranks() -> None:
    assert live_rank_config(SamplerConfig(), 4).rate_hz == 1.0
    assert live_rank_config(SamplerConfig(), 16).rate_hz == 0.5
    assert live_rank_config(SamplerConfig(rate_hz=3.0), 4).rate_hz == 3.0
