"""The ``top`` Textual app: a sampler thread posts immutable frames; widgets render only those.

Structure after memray's live TUI: the data source is injected (:class:`TopSource`), a plain thread driven by two
events polls it and hands each :class:`TopFrame` over with ``post_message`` (Textual's thread-safe channel), and
the UI changes state only in the message handler.
"""

from __future__ import annotations

import threading
from pathlib import Path

from rich.text import Text
from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.css.query import NoMatches
from textual.events import Resize
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, Input, Static, TabbedContent, TabPane

from dflash_diag.errors import DflashDiagError, ExitCode
from dflash_diag.model import ThreadStats
from dflash_diag.tui.ranks import RanksPane
from dflash_diag.tui.render import finding_texts
from dflash_diag.tui.source import TopSource
from dflash_diag.tui.widgets import (
    GpuPane,
    HistoryPane,
    PipelinePane,
    ProbesPane,
    StackView,
    ThreadsTable,
    TimelineView,
    TopHeader,
    sort_key,
)
from dflash_diag.view.findings import maybe_findings_lines
from dflash_diag.view.frame import TopFrame, stats_key
from dflash_diag.view.text import names_of
from dflash_diag.view.waits import waits_lines

# The rates +/- step through: low enough by default to be invisible to the trainer, high for short bursts.
RATE_STEPS_HZ: tuple[float, ...] = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0)
SORT_CYCLE: tuple[str, ...] = (
    "stage",
    "cpu",
    "dominant",
    "python",
    "native",
    "gpu_wait",
    "gil_wait",
    "queue_put",
    "queue_get",
    "idle",
    "name",
)


class FrameReady(Message):
    """A new frame from the sampler thread."""

    def __init__(self, frame: TopFrame) -> None:
        super().__init__()
        self.frame = frame


class SourceFailed(Message):
    """The source could not produce a frame (the process exited, or attaching failed)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__()
        self.message = message
        self.exit_code = exit_code


class SamplerThread(threading.Thread):
    """Polls the source every ``refresh_s`` off the UI thread; stops for good once the process is gone."""

    def __init__(self, app: App[int], source: TopSource, refresh_s: float) -> None:
        super().__init__(name="dflash-diag-top-sampler", daemon=True)
        self._app = app
        self._source = source
        self._refresh_s = refresh_s
        self._wake = threading.Event()
        self._canceled = threading.Event()

    def run(self) -> None:
        while not self._canceled.is_set():
            if not self._poll_once():
                return
            self._wake.wait(self._refresh_s)
            self._wake.clear()

    def _poll_once(self) -> bool:
        """One poll; False when there is nothing more to sample."""
        try:
            frame = self._source.poll()
        except DflashDiagError as exc:
            self._app.post_message(SourceFailed(str(exc), getattr(exc, "exit_code", ExitCode.FAILURE)))
            return getattr(exc, "exit_code", None) != ExitCode.NO_PROCESS
        except Exception as exc:  # a sampler bug must not kill the screen: show it, keep the last data
            self._app.post_message(
                SourceFailed(f"sampling failed: {type(exc).__name__}: {exc}", ExitCode.FAILURE)
            )
            return True
        if self._canceled.is_set():
            return False
        self._app.post_message(FrameReady(frame))
        return frame.process_alive

    def wake(self) -> None:
        self._wake.set()

    def cancel(self) -> None:
        self._canceled.set()
        self._wake.set()


HELP_TEXT = """\
[b]dflash-diag top[/b]: where each thread of a PyTorch training process spends its time.

[b]Keys[/b]
  p          pause / resume the display (sampling goes on; the newest data shows on resume)
  s / S      cycle the thread sort / reverse it (or click a column header)
  /          filter threads by name, stage or top frame (enter or escape to close, empty clears)
  up/down    select a thread;  enter  show its stack
  n          toggle native frames (samples with --native pause the process: rate-limited)
  + / -      sampling rate up / down;  a  back to the automatic rate (2-10 Hz by idle CPU)
  w          write a snapshot (bug-report bundle) of the process
  [ / ]      a job (torchrun): the previous / next rank, whose threads, stacks and timeline are shown
  1-7        show stack / timeline / GPUs / probes / findings / history (tok/s, queue, GPUs over minutes) /
             waits (what each thread waits on, the path to the root)
  ? or h     this help;  q or ctrl+c  quit

[b]States[/b] (letters in the bars and the timeline)
  P python+GIL   N native   G GPU wait   W GIL wait   > queue put (producer starved)
  < queue get (consumer starved)   C compile   K checkpoint recompute   . idle

Press escape to close."""


class HelpScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape", "dismiss_help", "Close"),
        Binding("q", "dismiss_help", "Close"),
        Binding("question_mark", "dismiss_help", "Close"),
        Binding("h", "dismiss_help", "Close"),
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Static(HELP_TEXT, id="help-text")

    def action_dismiss_help(self) -> None:
        self.dismiss(None)


class TopApp(App[int]):
    """Live view of one process. Returns an exit code: 0 on quit, the attach error's code when it never attached."""

    CSS_PATH = "top.tcss"
    TITLE = "dflash-diag top"
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        # Textual binds ctrl+c to "press ctrl+q to quit"; top quits on it, as docs/top.md and every top do.
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),
        Binding("p", "toggle_pause", "Pause"),
        Binding("s", "cycle_sort", "Sort"),
        Binding("S", "reverse_sort", "Reverse", show=False),
        Binding("slash", "filter", "Filter"),
        Binding("n", "toggle_native", "Native"),
        Binding("plus,equals_sign", "rate_up", "Rate+"),
        Binding("minus", "rate_down", "Rate-"),
        Binding("a", "rate_auto", "Auto rate", show=False),
        Binding("w", "snapshot", "Snapshot"),
        Binding("question_mark,h", "help", "Help"),
        Binding("1", "show_tab('tab-stack')", "Stack", show=False),
        Binding("2", "show_tab('tab-timeline')", "Timeline", show=False),
        Binding("3", "show_tab('tab-gpus')", "GPUs", show=False),
        Binding("4", "show_tab('tab-probes')", "Probes", show=False),
        Binding("5", "show_tab('tab-findings')", "Findings", show=False),
        Binding("6", "show_tab('tab-history')", "History", show=False),
        Binding("7", "show_tab('tab-waits')", "Waits", show=False),
        Binding("left_square_bracket", "rank(-1)", "Rank-", show=False),
        Binding("right_square_bracket", "rank(1)", "Rank+", show=False),
    ]

    def __init__(
        self,
        source: TopSource,
        *,
        refresh_s: float = 1.0,
        initial_frame: TopFrame | None = None,
        start_sampler: bool = True,
        native: bool = False,
        screenshot_after_s: float | None = None,
    ) -> None:
        super().__init__()
        # --screenshot: after this many seconds the screen is kept as SVG text and the app exits; the command
        # writes it (temporary sibling, rename: snapshot.output), never the app, whose crash report shows locals.
        self.screenshot_after_s = screenshot_after_s
        self.screenshot_svg: str | None = None
        self.source = source
        self.refresh_s = refresh_s
        self.frame: TopFrame | None = initial_frame  # what is on screen
        self.pending: TopFrame | None = None  # newest frame received while paused
        self.paused = False
        self.exited = initial_frame is not None and not initial_frame.process_alive
        self.error: str | None = None
        self.sort_name = "stage"
        self.sort_reverse = False
        self.filter_text = ""
        self.selected: str | None = None
        self.show_native = native
        self.last_snapshot_path: str | None = None
        self._start_sampler = start_sampler
        self._sampler: SamplerThread | None = None

    # ----- layout -----
    def compose(self) -> ComposeResult:
        yield TopHeader(id="header")
        yield PipelinePane(id="pipeline")
        yield RanksPane(id="ranks")
        yield Input(placeholder="filter threads (name, stage, frame); enter to close", id="filter")
        yield ThreadsTable(id="threads")
        # Tall terminals also show GPUs and probes at a glance (the `narrow` class hides this row).
        with Horizontal(id="overview"):
            yield GpuPane(classes="side-pane", id="gpus-side", compact=True)
            yield ProbesPane(classes="side-pane", id="probes-side", compact=True)
        with TabbedContent(id="detail", initial="tab-timeline"):
            with TabPane("Stack", id="tab-stack"):
                yield StackView(id="stack")
            with TabPane("Timeline", id="tab-timeline"):
                yield TimelineView(id="timeline")
            with TabPane("GPUs", id="tab-gpus"):
                yield GpuPane(id="gpus")
            with TabPane("Probes", id="tab-probes"):
                yield ProbesPane(id="probes")
            with TabPane("Findings", id="tab-findings"):
                yield Static(id="findings")
            with TabPane("History", id="tab-history"):
                yield HistoryPane(id="history")
            with TabPane("Waits", id="tab-waits"):
                yield Static(id="waits")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#filter", Input).display = False
        self.query_one(ThreadsTable).focus()
        self._render_frame()
        if self._start_sampler:
            self._sampler = SamplerThread(self, self.source, self.refresh_s)
            self._sampler.start()
        if self.screenshot_after_s is not None:
            self.set_timer(self.screenshot_after_s, self._keep_screenshot_and_exit)

    def _keep_screenshot_and_exit(self) -> None:
        self.screenshot_svg = self.export_screenshot()
        self.exit(ExitCode.OK)

    def _fatal_error(self) -> None:
        """A crash report without local variables (Textual's default shows them: a frame's locals can hold a
        board value, an environment or a path that must not reach a terminal log or a pasted issue)."""
        from rich.segment import Segments
        from rich.traceback import Traceback

        self.bell()
        traceback = Traceback(show_locals=False, width=None)
        self._exit_renderables.append(Segments(self.console.render(traceback, self.console.options)))
        self._close_messages_no_wait()

    def on_unmount(self) -> None:
        self._stop_sampler()

    def _stop_sampler(self) -> None:
        if self._sampler is not None:
            self._sampler.cancel()
            self._sampler.join(timeout=5.0)

    def on_resize(self, event: Resize) -> None:
        # Same trick as memray: one CSS class switches the layout for small terminals.
        self.set_class(event.size.width < 100 or event.size.height < 32, "narrow")
        self._render_frame()

    # ----- data in -----
    def on_frame_ready(self, message: FrameReady) -> None:
        if self.paused:
            self.pending = message.frame
            return
        self.frame = message.frame
        if not message.frame.process_alive:
            self.exited = True
        self.error = None
        self._render_frame()

    def on_source_failed(self, message: SourceFailed) -> None:
        if message.exit_code == ExitCode.NO_PROCESS:
            self.exited = True
        else:
            self.error = message.message
        self.notify(message.message, severity="error", timeout=8)
        self._render_header()

    # ----- rendering -----
    def visible_rows(self) -> list[ThreadStats]:
        if self.frame is None:
            return []
        needle = self.filter_text.lower()
        names = names_of(self.frame.pipeline, self.frame.threads)
        rows = [
            s
            for s in self.frame.threads
            if not needle
            or needle in s.name.lower()
            or needle in s.stage.lower()
            or needle in names.word(s.stage)
            or (s.top_frame is not None and needle in s.top_frame.name.lower())
        ]
        rows.sort(key=sort_key(self.sort_name))  # type: ignore[arg-type]
        if self.sort_reverse:
            rows.reverse()
        return rows

    def selected_stats(self, rows: list[ThreadStats]) -> ThreadStats | None:
        for stats in rows:
            if stats_key(stats) == self.selected:
                return stats
        return None

    def _render_header(self) -> None:
        try:
            header = self.query_one(TopHeader)
        except NoMatches:  # a frame that arrives while the app shuts down has nowhere to go
            return
        header.show(self.frame, paused=self.paused, exited=self.exited, error=self.error)

    def _render_frame(self) -> None:
        try:
            self._render_all()
        except NoMatches:  # shutting down: the widgets are gone
            return

    def _render_all(self) -> None:
        self._render_header()
        frame = self.frame
        if frame is None:
            return
        with self.batch_update():
            self.query_one(PipelinePane).show(frame)
            self.query_one(RanksPane).show(frame)
            table = self.query_one(ThreadsTable)
            table.ensure_columns(self.size.width)
            rows = self.visible_rows()
            if self.selected is None and rows:
                self.selected = stats_key(rows[0])
            table.show(rows, self.selected, names_of(frame.pipeline, frame.threads))
            self._render_detail(frame, rows)

    def _render_detail(self, frame: TopFrame, rows: list[ThreadStats]) -> None:
        self.query_one(StackView).show(frame, self.selected_stats(rows), self.show_native)
        self.query_one(TimelineView).show(frame, rows, self.selected)
        for gpus in self.query(GpuPane):
            gpus.show(frame)
        for probes in self.query(ProbesPane):
            probes.show(frame)
        self.query_one("#findings", Static).update(_findings_text(frame))
        names = names_of(frame.pipeline, frame.threads)
        self.query_one("#waits", Static).update(Text("\n".join(waits_lines(frame.waits, names))))
        self.query_one(HistoryPane).show(frame)

    # ----- selection -----
    @on(DataTable.RowHighlighted, "#threads")
    def _row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        key = event.row_key.value
        if key is None or key == self.selected:
            return
        self.selected = key
        if self.frame is not None:
            self._render_detail(self.frame, self.visible_rows())

    @on(DataTable.RowSelected, "#threads")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_show_tab("tab-stack")

    @on(DataTable.HeaderSelected, "#threads")
    def _header_selected(self, event: DataTable.HeaderSelected) -> None:
        table = self.query_one(ThreadsTable)
        name = table.column_sort_names[event.column_index]
        if name == self.sort_name:
            self.sort_reverse = not self.sort_reverse
        else:
            self.sort_name, self.sort_reverse = name, False
        self._render_frame()

    # ----- actions -----
    def action_toggle_pause(self) -> None:
        self.paused = not self.paused
        if not self.paused and self.pending is not None:
            self.frame, self.pending = self.pending, None
            self.exited = self.exited or not self.frame.process_alive
        self._render_frame()

    def action_cycle_sort(self) -> None:
        index = SORT_CYCLE.index(self.sort_name) if self.sort_name in SORT_CYCLE else -1
        self.sort_name = SORT_CYCLE[(index + 1) % len(SORT_CYCLE)]
        self.sort_reverse = False
        self.notify(f"sort: {self.sort_name}", timeout=2)
        self._render_frame()

    def action_reverse_sort(self) -> None:
        self.sort_reverse = not self.sort_reverse
        self._render_frame()

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = True
        box.focus()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value.strip()
        self._render_frame()

    @on(Input.Submitted, "#filter")
    def _filter_done(self, event: Input.Submitted) -> None:
        self._close_filter()

    def _close_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = bool(self.filter_text)  # keep showing an active filter so it is not forgotten
        self.query_one(ThreadsTable).focus()

    def key_escape(self) -> None:
        if self.query_one("#filter", Input).has_focus:
            self._close_filter()

    def action_toggle_native(self) -> None:
        try:
            self.show_native = self.source.set_native(not self.show_native)
        except DflashDiagError as exc:
            self.notify(str(exc), severity="error")
            return
        self.notify(f"native frames {'on (rate-limited)' if self.show_native else 'off'}", timeout=3)
        self._render_frame()
        self._wake_sampler()

    def _step_rate(self, direction: int) -> None:
        asked = self.source.rate_hz
        # From auto, step from the rate in force (what the header shows).
        current = asked if asked is not None else (self.frame.rate_hz if self.frame is not None else 2.0)
        if direction > 0:
            wanted = next((r for r in RATE_STEPS_HZ if r > current + 1e-9), RATE_STEPS_HZ[-1])
        else:
            wanted = next((r for r in reversed(RATE_STEPS_HZ) if r < current - 1e-9), RATE_STEPS_HZ[0])
        actual = self.source.set_rate(wanted)
        self.notify(f"sampling rate {actual:g} Hz (a: back to auto)", timeout=3)
        self._wake_sampler()

    def action_rate_auto(self) -> None:
        self.source.set_rate(None)
        self.notify("sampling rate: auto (2-10 Hz by the CPU left idle)", timeout=3)
        self._wake_sampler()

    def action_rate_up(self) -> None:
        self._step_rate(+1)

    def action_rate_down(self) -> None:
        self._step_rate(-1)

    def action_snapshot(self) -> None:
        self.notify("writing snapshot...", timeout=3)
        self.run_worker(self._write_snapshot, thread=True, exclusive=True, group="snapshot")

    def _write_snapshot(self) -> None:
        # Runs in a worker thread: the bundle gathers stacks and files, which must not freeze the screen.
        try:
            path = self.source.write_snapshot()
        except DflashDiagError as exc:
            self.call_from_thread(self.notify, f"snapshot failed: {exc}", severity="error", timeout=8)
            return
        self.last_snapshot_path = path
        self.call_from_thread(self.notify, f"snapshot written: {Path(path)}", timeout=8)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_show_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab

    def action_quit(self) -> None:  # type: ignore[override]
        self._stop_sampler()
        self.exit(ExitCode.OK)

    def action_rank(self, step: int) -> None:
        """A job: show the threads of the previous / next rank (the source re-frames on its next poll)."""
        select = getattr(self.source, "select_rank", None)
        index = select(step) if select is not None else None
        if index is None:
            self.notify("one process: no ranks to pick (docs/jobs.md)", timeout=2)
            return
        self.selected = None
        rows = self.frame.job.rows if self.frame is not None and self.frame.job is not None else ()
        label = f"rank {rows[index][0]}" if 0 <= index < len(rows) else f"row {index}"
        self.notify(f"showing {label}", timeout=2)
        self._wake_sampler()

    def _wake_sampler(self) -> None:
        if self._sampler is not None:
            self._sampler.wake()


def _findings_text(frame: TopFrame) -> Text:
    """The findings tab: the headline, then every finding with its evidence and fix (view/findings.py)."""
    return Text("\n").join(finding_texts(maybe_findings_lines(frame.findings, frame.headline)))
