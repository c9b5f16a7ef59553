"""The panes of ``top``. Each one renders from a :class:`TopFrame` and nothing else."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Sparkline, Static

from dflash_diag.model import NA, Maybe, PipelineView, StageNames, StageStats, ThreadState, ThreadStats
from dflash_diag.model.stage import STAGE_ORDER
from dflash_diag.tui.render import dominant_text, finding_texts, legend, share_bar, stack_lines, strip
from dflash_diag.view.findings import maybe_findings_lines
from dflash_diag.view.frame import TopFrame, stats_key
from dflash_diag.view.history import TOKENS, Series, buckets, queue_series_name
from dflash_diag.view.text import (
    STATE_ORDER,
    STATE_SHORT,
    STATE_STYLE,
    board_age_text,
    gpu_compact_line,
    gpu_detail_lines,
    maybe,
    names_of,
    probe_summary,
    rate_note,
    top_frame_text,
)


def clock_text(wall_s: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(wall_s))


def _rate_note(frame: TopFrame) -> str:
    """" (auto)" or " (asked 5, adaptive)": the header has no room for the reason (batch mode prints it)."""
    note = rate_note(frame.requested_rate_hz, frame.rate_hz, "")
    return f" ({note})" if note else ""


class TopHeader(Static):
    """One line: which process, its state, the sampling settings; a banner when it exited or sampling failed."""

    def show(self, frame: TopFrame | None, *, paused: bool, exited: bool, error: str | None) -> None:
        text = Text()
        text.append(" dflash-diag top ", style="bold reverse")
        if frame is None:
            text.append(" attaching...")
            self.update(text)
            return
        text.append(f" PID {frame.pid} ", style="bold")
        if paused:
            text.append(" PAUSED ", style="bold black on yellow")
        if exited:
            text.append(" PROCESS EXITED: last data shown ", style="bold white on red")
        elif error:
            text.append(f" {error} ", style="bold white on red")
        text.append(
            f" {clock_text(frame.wall_s)} UTC  {frame.rate_hz:.3g} Hz{_rate_note(frame)}{' +native' if frame.native else ''}"
            f"  {frame.window_s:.0f} s window  {frame.n_samples} samples  "
        )
        # The command line goes last and gets whatever width is left.
        room = max(0, self.app.size.width - text.cell_len - 1)
        cmd = " ".join(frame.cmdline) or "?"
        if len(cmd) > room:
            cmd = cmd[: max(0, room - 3)] + "..." if room > 3 else ""
        text.append(cmd, style="dim")
        self.update(text)


def _stage_line(stage: StageStats, word: str, width: int, starved: Maybe[float], sampled: Maybe[float],
                starved_label: str, measured: bool, wide: bool) -> Text:
    text = Text()
    text.append(f"{word:<9}", style="bold")
    text.append(f"{len(stage.threads):>2} thr ")
    text.append(f"{maybe(stage.batches_per_s, '{:.2f}'):>6} batch/s ")
    text.append(f"{maybe(stage.tokens_per_s, '{:,.0f}'):>8} tok/s ")
    text.append_text(share_bar(stage.shares, width))
    text.append(f" {starved_label} {maybe(starved, '{:.0%}')}")
    if measured:  # the probe's measurement, with the stacks' estimate of the same window next to it
        text.append(f" (probe; sampled {maybe(sampled, '{:.0%}')})" if wide else " (probe)", style="dim")
    return text


def _trend_text(pipeline: PipelineView) -> str:
    trend = pipeline.queue_trend_per_s
    if isinstance(trend, NA) or not pipeline.queue_trend:
        return "trend n/a"
    return f"trend {trend:+.2f}/s ({pipeline.queue_trend})"  # the verdict's word, from the same slope


class PipelinePane(Vertical):
    """The producer and consumer stages: rates, state shares, the queue between them, and the verdict."""

    def compose(self) -> ComposeResult:
        yield Static(id="pipeline-stages")
        with Horizontal(id="queue-row"):
            yield Static(id="queue-label")
            yield Sparkline([], id="queue-spark")
            yield Static(id="queue-trend")
        yield Static(id="pipeline-verdict")

    def show(self, frame: TopFrame) -> None:
        stages = self.query_one("#pipeline-stages", Static)
        verdict = self.query_one("#pipeline-verdict", Static)
        pipeline = frame.pipeline
        if isinstance(pipeline, NA):
            stages.update(Text(f"Pipeline {pipeline}", style="dim"))
            self.query_one("#queue-label", Static).update("")
            self.query_one("#queue-trend", Static).update("")
            self.query_one("#queue-spark", Sparkline).data = []
            verdict.update("")
            return
        wide = self.app.size.width >= 100  # the screen: this pane may not be laid out yet
        bar_width = 20 if wide else 12
        measured = pipeline.probe_boards > 0
        stages.update(
            Group(
                _stage_line(pipeline.target, pipeline.names.word(pipeline.target.stage), bar_width,
                            pipeline.producer_starved_share,
                            pipeline.producer_starved_sampled, "put-wait", measured, wide),
                _stage_line(pipeline.drafter, pipeline.names.word(pipeline.drafter.stage), bar_width,
                            pipeline.consumer_starved_share,
                            pipeline.consumer_starved_sampled, "get-wait", measured, wide),
            )
        )
        depth = f"{maybe(pipeline.queue_depth, '{:d}', '?')}/{maybe(pipeline.queue_maxsize, '{:d}', '?')}"
        self.query_one("#queue-label", Static).update(Text(f"{pipeline.queue_name} {depth} ", style="bold"))
        self.query_one("#queue-spark", Sparkline).data = [
            float(d) for d in pipeline.queue_depth_history[-60:]
        ]
        self.query_one("#queue-trend", Static).update(f" {_trend_text(pipeline)}")
        style = "bold green" if pipeline.bottleneck == "balanced" else "bold yellow"
        if pipeline.bottleneck == "unknown":
            style = "dim"
        # Every pane covers the same window; the verdict says which. On crowded CPUs it says that too: the shares
        # and the stage that looks slower follow the scheduler then.
        line = Text(f"verdict (last {frame.window_s:.0f} s): {pipeline.verdict}", style=style)
        if pipeline.cpu_note:
            line.append(f"\n{pipeline.cpu_note}", style="bold red")
        verdict.update(line)


class ThreadsTable(DataTable[Text | str]):
    """One row per Python thread; the cursor row is the selected thread."""

    WIDE_MIN_COLS = 112
    BAR_WIDTH = 12

    def __init__(self, **kwargs: object) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)  # type: ignore[arg-type]
        self._wide: bool | None = None
        self._width = 0
        self.top_frame_width = 20
        self.column_sort_names: list[str] = []

    def ensure_columns(self, width: int) -> None:
        """Narrow screens get a state bar and the dominant state; wide ones add one column per state.

        Widths are fixed so the table never scrolls sideways: the top frame takes what is left.
        """
        wide = width >= self.WIDE_MIN_COLS
        if wide == self._wide and width == self._width:
            return
        self._wide, self._width = wide, width
        self.clear(columns=True)
        columns: list[tuple[str, str, int]] = [("thread", "name", 14), ("tid", "tid", 7)]
        if wide:
            # Wide: exact per-state percentages (coloured like the bars) instead of the bar.
            columns.append(("stage", "stage", 8))
            columns += [(f"{STATE_SHORT[s]}%", s.value, len(STATE_SHORT[s]) + 1) for s in STATE_ORDER]
        else:
            columns += [("states", "dominant", self.BAR_WIDTH), ("most", "dominant", 13)]
        columns.append(("cpu%", "cpu", 4))
        # Each column costs its width plus one cell of padding on each side.
        used = sum(w + 2 for _, _, w in columns)
        self.top_frame_width = max(8, width - used - 2)
        columns.append(("top frame", "name", self.top_frame_width))
        self.column_sort_names = [sort for _, sort, _ in columns]
        for label, _, col_width in columns:
            self.add_column(label, key=label, width=col_width)

    def show(self, rows: list[ThreadStats], selected: str | None, names: StageNames | None = None) -> None:
        names = names or StageNames()
        self.clear(columns=False)
        for stats in rows:
            # A helper (autograd worker) is marked: its time is also in its stage's own threads.
            name = Text(stats.name, style="bold", overflow="ellipsis", no_wrap=True)
            if stats.helper:
                name = Text.assemble((stats.name, "bold"), (" ⤷bwd", "dim"), overflow="ellipsis", no_wrap=True)
            cells: list[Text | str] = [
                name,
                str(stats.os_thread_id) if stats.os_thread_id is not None else "?",
            ]
            if self._wide:
                cells.append(names.word(stats.stage))
                cells += [_share_cell(stats.shares.get(s, 0.0), s) for s in STATE_ORDER]
            else:
                cells += [share_bar(stats.shares, self.BAR_WIDTH), dominant_text(stats.shares)]
            cells += [
                Text(maybe(stats.cpu_pct, "{:.0f}"), justify="right"),
                Text(top_frame_text(stats), overflow="ellipsis", no_wrap=True),
            ]
            self.add_row(*cells, key=stats_key(stats))
        keys = [stats_key(s) for s in rows]
        if selected in keys:
            self.move_cursor(row=keys.index(selected), scroll=True)


def _share_cell(share: float, state: ThreadState) -> Text:
    """A percentage, in the state's colour when it matters (>= 10%), dim when zero."""
    style = STATE_STYLE[state] if share >= 0.1 else ("grey35" if share == 0 else "")
    return Text(f"{100 * share:.0f}", style=style, justify="right")


class StackView(Static):
    """The selected thread's newest stack (native frames when on and available)."""

    def show(self, frame: TopFrame, stats: ThreadStats | None, native: bool) -> None:
        if stats is None:
            self.update(Text("no thread selected (arrows move, enter shows the stack)", style="dim"))
            return
        key = stats_key(stats)
        header = Text()
        header.append(f"{stats.name}", style="bold")
        header.append(f"  TID {stats.os_thread_id}  stage {names_of(frame.pipeline, frame.threads).word(stats.stage)}  ")
        header.append_text(dominant_text(stats.shares))
        if stats.attribution:
            header.append(f"\n{stats.attribution}", style="dim")
        frames = frame.stacks.get(key, ())
        note = Text("")
        if native:
            native_frames = frame.native_stacks.get(key)
            if native_frames is not None:
                frames = native_frames
                note = Text("native frames (from the newest native sample)", style="dim")
            else:
                note = Text(
                    "native frames requested: none sampled yet (native samples are rate-limited)", style="dim"
                )
        body = stack_lines(frames) if frames else [Text("  (no stack in the newest sample)", style="dim")]
        self.update(Group(header, note, *body))


class TimelineView(Static):
    """A time-aligned strip of every thread's state, one character per sample, newest on the right."""

    def show(self, frame: TopFrame, rows: list[ThreadStats], selected: str | None) -> None:
        name_width = min(18, max((len(s.name) for s in rows), default=6))
        # The pane may not be laid out yet (hidden tab): size it from the screen, which is always known.
        strip_width = max(10, self.app.size.width - name_width - 8)
        lines: list[Text] = []
        for stats in rows:
            is_selected = stats_key(stats) == selected
            line = Text("> " if is_selected else "  ", style="bold reverse" if is_selected else "")
            line.append(f"{stats.name[:name_width]:<{name_width}} ", style="bold" if is_selected else "")
            line.append_text(strip(stats.timeline, strip_width))
            lines.append(line)
        if not lines:
            lines.append(Text("no threads sampled yet", style="dim"))
        per_sample_s = 1.0 / frame.rate_hz if frame.rate_hz > 0 else 0.0
        wide = self.app.size.width >= 100
        footer = Text(
            f"  1 char = 1 sample (~{per_sample_s:.2g} s), newest right.  " if wide else "  ", style="dim"
        )
        footer.append_text(legend(short=True))
        self.update(Group(*lines, footer))


class GpuPane(Static):
    """Per-device NVML readings, or the reason there are none (``compact``: one line per device)."""

    def __init__(self, *, compact: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.compact = compact

    def show(self, frame: TopFrame) -> None:
        if isinstance(frame.gpus, NA):
            self.update(Text(f"GPUs {frame.gpus}", style="dim"))
            return
        if not frame.gpus:
            self.update(Text("GPUs: none visible", style="dim"))
            return
        lines: list[Text] = []
        if self.compact:
            for gpu in frame.gpus:
                lines.append(Text(gpu_compact_line(gpu), no_wrap=True, overflow="ellipsis"))
                users = [t.name for t in frame.threads if t.gpu_index == gpu.index]
                if users:
                    lines.append(
                        Text(f"  {', '.join(users)}", style="dim", no_wrap=True, overflow="ellipsis")
                    )
            self.update(Group(*lines))
            return
        for gpu in frame.gpus:
            for i, line in enumerate(gpu_detail_lines(gpu, frame.pid, frame.threads)):
                lines.append(Text(line, style="bold" if i == 0 else ""))
        self.update(Group(*lines))


class ProbesPane(Static):
    """Probe readings from the board, its staleness, and the live findings (``compact``: claims only)."""

    def __init__(self, *, compact: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.compact = compact

    def show(self, frame: TopFrame) -> None:
        lines: list[Text] = [Text(board_age_text(frame.board, frame.wall_s), style="dim")]
        for name, reading in probe_summary(frame.board):
            line = Text(f"{name:<11}", style="bold", no_wrap=self.compact, overflow="ellipsis")
            line.append(reading, style="red" if ("STALE" in reading or "SLOW" in reading) else "")
            lines.append(line)
        lines.append(Text("findings", style="bold underline"))
        shown = maybe_findings_lines(frame.findings, frame.headline, "claim" if self.compact else "fix")
        lines += finding_texts(shown, indent="  ", one_line=self.compact)
        for warning in frame.warnings:
            lines.append(Text(f"warning: {warning}", style="yellow"))
        self.update(Group(*lines))


SortKey = Callable[[ThreadStats], object]


def sort_key(name: str) -> SortKey:
    """Row order for a sort name: text columns ascending, numbers descending (busiest first)."""
    if name == "stage":
        return lambda s: (STAGE_ORDER.get(s.stage, 2), s.name)
    if name == "name":
        return lambda s: s.name
    if name == "tid":
        return lambda s: s.os_thread_id if s.os_thread_id is not None else -1
    if name == "cpu":
        return lambda s: -(s.cpu_pct if isinstance(s.cpu_pct, float | int) else -1.0)
    if name == "dominant":
        return lambda s: (
            -max((s.shares.get(st, 0.0) for st in STATE_ORDER if st != ThreadState.IDLE), default=0.0)
        )
    state = ThreadState(name)
    return lambda s: -s.shares.get(state, 0.0)


MAX_GPU_ROWS = 8
_HISTORY_SLOTS = ("tokens", "queue", *(f"gpu{i}" for i in range(MAX_GPU_ROWS)))


def _span_text(seconds: float) -> str:
    seconds = max(0.0, seconds)
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds // 60:.0f} min {seconds % 60:02.0f} s"


def _value_text(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def history_values(series: Series, end_wall_s: float, span_s: float, width: int) -> list[float]:
    """One bar per column from the first reading to now; a column without a reading repeats the one before."""
    values: list[float] = []
    for value in buckets(series, end_wall_s, span_s, width):
        if value is None:
            if not values:
                continue
            value = values[-1]
        values.append(value)
    return values


class HistoryPane(VerticalScroll):
    """tok/s, the queue's depth and each GPU's utilisation over the last minutes, on a linear time axis."""

    def compose(self) -> ComposeResult:
        yield Static(id="history-note")
        for slot in _HISTORY_SLOTS:
            yield Static(id=f"history-label-{slot}", classes="history-label")
            yield Sparkline([], id=f"history-spark-{slot}", classes="history-spark")

    def _rows(self, frame: TopFrame) -> list[tuple[str, Series | None, str]]:
        """(slot, series or None, what to say when there is none) for every row shown."""
        history = frame.history
        pipeline = frame.pipeline
        queue = queue_series_name(pipeline) if isinstance(pipeline, PipelineView) else "q_hs depth"
        rows: list[tuple[str, Series | None, str]] = [
            ("tokens", history.get(TOKENS), "tok/s: N/A: the program publishes no tokens_per_s on its probe board"),
            ("queue", history.get(queue), f"{queue}: N/A: no watched queue on the probe board"),
        ]
        gpus = [s for s in history.series if s.name.startswith("GPU ")][:MAX_GPU_ROWS]
        for i, series in enumerate(gpus):
            rows.append((f"gpu{i}", series, ""))
        if not gpus:
            reason = str(frame.gpus) if isinstance(frame.gpus, NA) else "no utilisation reading yet"
            rows.append(("gpu0", None, f"GPUs: {reason}"))
        return rows

    _frame: TopFrame | None = None

    def on_resize(self) -> None:
        # The charts have one bar per column: redraw at the new width (the frame is immutable, keeping it is safe).
        if self._frame is not None:
            self.show(self._frame)

    def show(self, frame: TopFrame) -> None:
        self._frame = frame
        history = frame.history
        end = history.end_wall_s if history.end_wall_s is not None else frame.wall_s
        firsts = [s.points[0][0] for s in history.series if s.points]
        span = min(history.horizon_s, end - min(firsts)) if firsts else 0.0
        width = max(10, self.content_size.width or 60)
        self.query_one("#history-note", Static).update(Text(
            f"last {_span_text(span)} (up to {_span_text(history.horizon_s)}), time left to right, one bar per "
            f"{span / width:.1f} s; each line scaled from its min to its max", style="dim"))
        shown = set()
        for slot, series, missing in self._rows(frame):
            shown.add(slot)
            label = self.query_one(f"#history-label-{slot}", Static)
            spark = self.query_one(f"#history-spark-{slot}", Sparkline)
            label.display = True
            if series is None or not series.points or span <= 0:
                label.update(Text(missing or f"{series.name if series else slot}: no reading yet", style="dim"))
                spark.display = False
                continue
            low, high = series.low_high() or (0.0, 0.0)
            text = Text()
            text.append(f"{series.name:<13}", style="bold")
            text.append(f" now {_value_text(series.last or 0.0):>8}")
            text.append(f"   min {_value_text(low)}  max {_value_text(high)}", style="dim")
            label.update(text)
            spark.display = True
            spark.data = history_values(series, end, span, width)
        for slot in _HISTORY_SLOTS:
            if slot not in shown:
                self.query_one(f"#history-label-{slot}", Static).display = False
                self.query_one(f"#history-spark-{slot}", Sparkline).display = False
