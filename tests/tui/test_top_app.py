"""Pilot tests of the ``top`` app: keys and panes over a fake source (Textual really runs, headless)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

import pytest
from textual.binding import Binding
from textual.pilot import Pilot
from textual.widgets import DataTable, Input, TabbedContent
from top_fakes import GPUS, THREADS, FakeSource, make_frame
from workload import WORKLOAD

from dflash_diag.cli.top_live import LiveSource
from dflash_diag.errors import AttachError, CommandError, ExitCode
from dflash_diag.observe import Target, Window
from dflash_diag.tui.app import FrameReady, HelpScreen, SourceFailed, TopApp
from dflash_diag.view.frame import TopFrame


def screen_text(app: TopApp) -> str:
    """What the terminal shows, as plain text (the compositor's lines)."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def row_names(app: TopApp) -> list[str]:
    table = app.query_one("#threads", DataTable)
    return [str(table.get_row(row.key)[0]) for row in table.ordered_rows]


def run(
    body: Callable[[TopApp, Pilot[int]], Awaitable[None]],
    *,
    source: FakeSource | None = None,
    frame: TopFrame | None = None,
    size: tuple[int, int] = (120, 40),
    start_sampler: bool = False,
) -> TopApp:
    """Run ``body`` against a headless app (no pytest-asyncio here: one event loop per test)."""
    app = TopApp(source or FakeSource(), initial_frame=frame or make_frame(), start_sampler=start_sampler)

    async def main() -> None:
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            await body(app, pilot)

    asyncio.run(main())
    return app


async def post(app: TopApp, pilot: Pilot[int], frame: TopFrame) -> None:
    app.post_message(FrameReady(frame))
    await pilot.pause()


def test_panes_show_the_frame() -> None:
    async def body(app: TopApp, pilot: Pilot[int]) -> None:
        text = screen_text(app)
        assert "PID 4242" in text
        assert "q_hs 12/16" in text and "trend +0.31/s (rising)" in text
        assert "verdict (last 10 s): drafter-bound: q_hs 12/16 rising" in text  # one window, one word
        assert "put-wait 25% (probe; sampled 22%)" in text
        for t in THREADS:
            assert t.name in text
        assert "chunked_loss" in text  # top frame column

    run(body)


def test_the_pipeline_pane_says_when_the_cpus_are_oversubscribed() -> None:
    from top_fakes import PIPELINE

    note = "CPUs oversubscribed: threads that compute waited for a core 48% of the window and ran 38-57% of one"

    async def body(app: TopApp, pilot: Pilot[int]) -> None:
        assert "verdict (last 10 s): drafter-bound" in screen_text(app) and "CPUs oversubscribed" not in screen_text(app)
        await post(app, pilot, make_frame(pipeline=replace(PIPELINE, cpu_note=note)))
        assert note in screen_text(app)

    run(body)


def test_sampler_thread_delivers_frames_and_is_joined_on_exit() -> None:
    source = FakeSource([make_frame(n_samples=1), make_frame(n_samples=2)])

    async def body(app: TopApp, pilot: Pilot[int]) -> None:
        for _ in range(200):  # event-based: wait for the thread's frames, generously
            if app.frame is not None and app.frame.n_samples == 2:
                break
            await asyncio.sleep(0.05)
        assert app.frame is not None and app.frame.n_samples == 2
        assert source.polls >= 2

    app = TopApp(source, refresh_s=0.05)

    async def main() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await body(app, pilot)

    asyncio.run(main())
    # the sampler thread was joined on unmount
    assert not [t for t in threading.enumerate() if t.name == "dflash-diag-top-sampler" and t.is_alive()]


def test_pause_keeps_the_frame_and_resume_shows_the_newest() -> None:
    async def body(app: TopApp, pilot: Pilot[int]) -> None:
        await pilot.press("p")
        await post(app, pilot, make_frame(n_samples=999))
        assert app.frame is not None and app.frame.n_samples == 120
        assert "PAUSED" in screen_text(app)
        await pilot.press("p")
        await pilot.pause()
        assert app.frame is not None and app.frame.n_samples == 999
        assert "PAUSED" not in screen_text(app)

    run(body)


def test_sort_cycles_and_reorders_rows() -> None:
    async def body(app: TopApp, pilot: Pilot[int]) -> None:
        # Default: by stage (target, drafter, other).
        assert row_names(app) == [
            "target-0",
            "target-1",
            "drafter-0",
            "drafter-1",
            "MainThread",
            "wandb-writer",
        ]
        await pilot.press("s")  # cpu, busiest first
        await pilot.pause()
        assert app.sort_name == "cpu"
        assert row_names(app) == [
            "drafter-1",
            "drafter-0",
            "target-0",
            "target-1",
            "wandb-writer",
            "MainThread",
        ]
        await pilot.press("S")  # reversed
        await pilot.pause()
        assert row_names(app)[0] == "MainThread"

    run(body)


def test_clicking_a_column_header_sorts_by_it() -> None:
    async def body(app: TopApp, pilot: Pilot[int]) -> None:
        table = app.query_one("#threads", DataTable)
        column = table.column_sort_names.index("gil_wait")
        table.post_message(DataTable.HeaderSelected(table, list(table.columns)[column], column, "gilW%"))
        await pilot.pause()
        assert app.sort_name == "gil_wait"
        assert row_names(app)[:2] == ["drafter-1", "drafter-0"]

    run(body)


def test_filter_narrows_rows_and_stays_visible() -> None:
    async def body(app: TopApp, pilot: Pilot[int]) -> None:
        await pilot.press("slash")
        assert app.query_one("#filter", Input).has_focus
        await pilot.press(*"drafter")
        await pilot.pause()
        assert row_names(app) == ["drafter-0", "drafter-1"]
        await pilot.press("enter")
        await pilot.pause()
        assert app.query_one("#filter", Input).display  # an active filter stays on screen
        assert app.query_one("#threads", DataTable).has_focus

    run(body)


def test_select_shows_stack_and_timeline_marks_the_thread() -> None:
    async def body(app: TopApp, pilot: Pilot[int]) -> None:
        await pilot.press("down")
        await pilot.pause()
        assert app.selected == "tid:1002"
        assert "> target-1" in screen_text(app)  # the timeline marks the selected thread
        await pilot.press("enter")
        await pilot.pause()
        assert app.query_one(TabbedContent).active == "tab-stack"
        text = screen_text(app)
        assert "target-1  TID 1002" in text and "threading.py:982" in text

    run(body)


def test_native_toggle_asks_the_source_and_shows_native_frames() -> None:
    source = FakeSource()

    async def body(app: TopApp, pilot: Pilot[int]) -> None:
        await pilot.press("down", "down", "down", "enter")  # drafter-1, whose native stack the fake has
        await pilot.press("n")
        await pilot.pause()
        assert source.native is True
        assert "[native] at::native::addmm" in screen_text(app)
        await pilot.press("n")
        await pilot.pause()
        assert source.native is False
        assert "[native]" not in screen_text(app)

    run(body, source=source)


def test_rate_up_and_down_change_the_source_rate() -> None:
    source = FakeSource()

    async def body(app: TopApp, pilot: Pilot[int]) -> None:
        await pilot.press("plus")
        assert source.rate_hz == 5.0
        await pilot.press("minus", "minus")
        assert source.rate_hz == 1.0
        for _ in range(10):
            await pilot.press("plus")
        assert source.rate_hz == 50.0  # the source's clamp wins

    run(body, source=source)


def test_help_opens_and_closes() -> None:
    async def body(app: TopApp, pilot: Pilot[int]) -> None:
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert "toggle native frames" in screen_text(app)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)

    run(body, size=(80, 24))


def test_help_and_docs_name_every_tab_key() -> None:
    """One number key per tab: the help screen and docs/top.md say how many there are (they said 1-6 of 7)."""
    from dflash_diag.tui.app import HELP_TEXT

    tabs = [b for b in TopApp.BINDINGS if isinstance(b, Binding) and b.key.isdigit() and "show_tab" in b.action]
    last = max(int(b.key) for b in tabs)
    assert [int(b.key) for b in tabs] == list(range(1, last + 1))
    assert f"  1-{last} " in HELP_TEXT and all(b.description.lower() in HELP_TEXT.lower() for b in tabs)
    docs = (Path(__file__).resolve().parents[2] / "docs" / "top.md").read_text()
    assert f"(keys 1-{last})" in docs and f"| `1`-`{last}` |" in docs
    assert all(b.description in docs for b in tabs)


def test_snapshot_key_calls_the_writer() -> None:
    source = FakeSource()

    async def body(app: TopApp, pilot: Pilot[int]) -> None:
        await pilot.press("w")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert source.snapshots == ["/tmp/fake-snapshot-0.tar.gz"]
        assert app.last_snapshot_path == "/tmp/fake-snapshot-0.tar.gz"

    run(body, source=source)


def test_failed_snapshot_is_reported_and_the_screen_lives_on() -> None:
    source = FakeSource()
    source.snapshot_error = CommandError("snapshot-4242.tar.gz exists; use --force", ExitCode.EXISTS)
    notes: list[str] = []

    async def body(app: TopApp, pilot: Pilot[int]) -> None:
        app.notify = lambda message, **kw: notes.append(str(message))  # type: ignore[method-assign]
        await pilot.press("w")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.last_snapshot_path is None
        assert any("snapshot failed" in n and "exists" in n for n in notes)
        assert "target-0" in screen_text(app)

    run(body, source=source)


def test_exited_process_banner_keeps_last_data() -> None:
    async def body(app: TopApp, pilot: Pilot[int]) -> None:
        await post(app, pilot, make_frame(process_alive=False))
        text = screen_text(app)
        assert "PROCESS EXITED" in text
        assert "drafter-1" in text and "verdict (last" in text

    run(body)


def test_attach_lost_after_start_shows_exited_and_keeps_data() -> None:
    async def body(app: TopApp, pilot: Pilot[int]) -> None:
        app.post_message(SourceFailed("process 4242 exited", ExitCode.NO_PROCESS))
        await pilot.pause()
        assert app.exited
        assert "PROCESS EXITED" in screen_text(app)
        assert "target-0" in screen_text(app)

    run(body)


def test_sampler_error_from_source_reaches_the_header() -> None:
    source = FakeSource(
        error=AttachError("ptrace not permitted: set kernel.yama.ptrace_scope=0", ExitCode.PERMISSION)
    )

    async def body(app: TopApp, pilot: Pilot[int]) -> None:
        for _ in range(200):
            if app.error:
                break
            await asyncio.sleep(0.05)
        assert app.error is not None and "ptrace_scope" in app.error
        assert "target-0" in screen_text(app)  # the last frame stays

    run(body, source=source, start_sampler=True)


def test_narrow_layout_at_80x24() -> None:
    async def body(app: TopApp, pilot: Pilot[int]) -> None:
        assert app.has_class("narrow")
        text = screen_text(app)
        assert "most" in text and "nat%" not in text  # bar + dominant state instead of per-state columns
        assert "target-0" in text and "verdict (last" in text

    run(body, size=(80, 24))


def test_gpu_and_probe_tabs() -> None:
    frame = make_frame()

    async def body(app: TopApp, pilot: Pilot[int]) -> None:
        await pilot.press("3")
        await pilot.pause()
        assert "N/A: no NVML" in screen_text(app)
        await pilot.press("4")
        await pilot.pause()
        text = screen_text(app)
        assert "no update for 42 s" in text
        assert "STALE: reference_trainer.loss" in text
        await post(app, pilot, replace(frame, gpus=GPUS))
        await pilot.press("3")
        await pilot.pause()
        text = screen_text(app)
        assert "GPU0 NVIDIA H200  util 97%" in text
        assert "threads: target-0, target-1" in text

    run(body, frame=frame)


@pytest.mark.slow
def test_live_source_on_a_real_process_fills_the_screen(workload: subprocess.Popen[str]) -> None:
    """The real source (py-spy, /proc, analyses) behind the real app: the threads appear with their states."""
    assert workload.poll() is None, "the session's workload exited before this test (its --max-s)"
    source = LiveSource(Target(workload.pid), Window(rate_hz=5.0), history_s=10.0)
    app = TopApp(source, refresh_s=0.3)

    async def main() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            for _ in range(600):  # generous: two busy cores
                frame = app.frame
                if (
                    frame is not None
                    and frame.n_samples >= 3
                    and {"target-0", "drafter-0"} <= {t.name for t in frame.threads}
                ):
                    break
                await asyncio.sleep(0.05)
            await pilot.pause()
            text = screen_text(app)
            assert "target-0" in text and "drafter-0" in text and f"PID {workload.pid}" in text
            stages = {t.name: t.stage for t in app.frame.threads} if app.frame else {}
            assert stages.get("target-0") == "target" and stages.get("drafter-0") == "drafter"
            # the live source folds every frame into the history the History tab draws
            assert app.frame is not None and app.frame.history.end_wall_s == app.frame.wall_s
            await pilot.press("q")

    try:
        asyncio.run(main())
    finally:
        source.close()


@pytest.mark.slow
def test_real_process_exit_shows_banner_and_keeps_data() -> None:
    proc = subprocess.Popen(
        [sys.executable, str(WORKLOAD), "--max-s", "3"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
        source = LiveSource(Target(proc.pid), Window(rate_hz=5.0), history_s=30.0)
        app = TopApp(source, refresh_s=0.3)

        async def main() -> None:
            async with app.run_test(size=(120, 40)) as pilot:
                for _ in range(1200):  # the workload stops by itself after 3 s; generous for busy cores
                    if app.exited:
                        break
                    await asyncio.sleep(0.05)
                await pilot.pause()
                assert app.exited
                text = screen_text(app)
                assert "PROCESS EXITED" in text and "target-0" in text  # the last data stays

        try:
            asyncio.run(main())
        finally:
            source.close()
    finally:
        proc.kill()
        proc.wait(timeout=30)


@pytest.mark.slow
def test_snapshot_key_writes_a_real_bundle(
    workload: subprocess.Popen[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`w` on the real source: the bug-report bundle of the watched process lands in the working directory."""
    monkeypatch.chdir(tmp_path)
    source = LiveSource(Target(workload.pid), Window(rate_hz=2.0), history_s=10.0)
    app = TopApp(source, refresh_s=0.5)

    async def main() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.press("w")
            for _ in range(600):
                if app.last_snapshot_path is not None:
                    break
                await asyncio.sleep(0.05)

    try:
        asyncio.run(main())
    finally:
        source.close()
    assert app.last_snapshot_path is not None
    bundle = Path(app.last_snapshot_path)
    assert (
        bundle.parent == tmp_path.resolve() and bundle.name.endswith(".tar.gz") and bundle.stat().st_size > 0
    )


@pytest.mark.parametrize("key", ["ctrl+c", "q"])
def test_ctrl_c_and_q_quit_even_from_the_filter_box(key: str) -> None:
    """docs/top.md: Ctrl-C quits (Textual's default only says "press ctrl+q"), also while typing a filter."""

    async def body(app: TopApp, pilot: Pilot[int]) -> None:
        if key == "ctrl+c":
            await pilot.press("slash", "d", "r")  # typing in the filter box
            assert app.query_one("#filter", Input).has_focus
        await pilot.press(key)
        await pilot.pause()

    app = run(body)
    assert app.return_code == 0  # None when the app was only torn down by the test harness


def test_the_waits_tab_shows_the_path_to_the_root_and_each_thread() -> None:
    from dflash_diag.model.waits import WAIT_QUEUE_GET, ChainHop, ThreadWaits, WaitEdge, WaitGraph

    edge = WaitEdge(kind=WAIT_QUEUE_GET, target="feats", share=0.82, site="fit (fit.py:40)", to_threads=("loader",))
    graph = WaitGraph(
        threads=(ThreadWaits(name="loader", stage="other", n_samples=50, computing_share=0.91,
                             hot="decode (data.py:33) 91%", waits=(), cpu_pct=97.0, stack_changed=True),
                 ThreadWaits(name="trainer", stage="drafter", n_samples=50, computing_share=0.1, hot="", waits=(edge,),
                             cpu_pct=5.0, stack_changed=True, holds=("Trainer._lock",))),
        chain=(ChainHop(threads=("trainer",), edge=edge), ChainHop(threads=("loader",), edge=None,
                                                                  hot="decode (data.py:33) 91%")),
        progress=True, process_cpu_pct=102.0)

    async def body(app: TopApp, pilot: Pilot[int]) -> None:
        await pilot.press("7")
        await pilot.pause()
        assert app.query_one("#detail", TabbedContent).active == "tab-waits"
        text = screen_text(app)
        assert "trainer waits on `feats` (get, empty) 82% at fit (fit.py:40) <- loader spends decode" in text
        assert "holds Trainer._lock" in text

    run(body, frame=make_frame(waits=graph), size=(160, 48))
