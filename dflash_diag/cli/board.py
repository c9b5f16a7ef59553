"""`dflash-diag board PID`: print what a process's in-process probes published (docs/board.md)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping
from typing import Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from dflash_contract.board import STATUS_OK, PayloadKeys
from dflash_diag.cli._output import console as make_console
from dflash_diag.cli._output import dump_json, pid_arg, shown
from dflash_diag.errors import BoardError, ExitCode
from dflash_diag.model.board import Board
from dflash_diag.sources.board import list_boards, read_board, staleness

_MAX_LIST_ITEMS = 8


class BoardCommand:
    """Print the current readings of a process's in-process probes (the first way to look).

    The process must run under the probes: `dflash-diag run -- python script.py ...`, or the reference
    trainer (probes on by default). Without PID: the processes that publish boards. Exit codes: 3 no such
    process, 6 no/invalid board.
    """

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("pid", type=pid_arg, nargs="?", metavar="PID",
                            help="the process to look at (omit it to list the processes that publish boards)")
        parser.add_argument("--json", action="store_true", help="print the validated board as JSON")
        parser.add_argument(
            "--board-dir",
            metavar="DIR",
            help="where boards live (default: $DFLASH_DIAG_BOARD_DIR, $XDG_RUNTIME_DIR/dflash-diag, /tmp/dflash-diag-UID)",
        )

    def run(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
        if args.pid is None:
            return self._list(args)
        board = read_board(args.pid, args.board_dir)
        now_s = time.time()
        if args.json:
            dump_json(board_document(board, now_s))
            return ExitCode.OK
        _console().print(render_board(board, now_s))
        return ExitCode.OK


    def _list(self, args: argparse.Namespace) -> int:
        now_s = time.time()
        entries = list_boards(args.board_dir)
        live = [e for e in entries if isinstance(e, Board)]
        # Boards of processes that are gone are not news (and were cleaned up); unsafe directories are.
        problems = [str(e) for e in entries if isinstance(e, BoardError) and e.exit_code != ExitCode.NO_PROCESS]
        if args.json:
            dump_json([board_document(b, now_s) for b in live])
            return ExitCode.OK
        if not live:
            print("no process publishes a probe board here; start one with: dflash-diag run -- python script.py ...")
            return ExitCode.OK
        table = Table(show_edge=False, pad_edge=False)
        for col in ("PID", "age", "probes", "command"):
            table.add_column(col)
        for b in live:
            stale = staleness(b, now_s)
            age = f"{b.age_s(now_s):.0f} s" + (" (stale)" if stale else "")
            ok = sum(1 for p in b.probes.values() if p.get(PayloadKeys.STATUS) == STATUS_OK)
            table.add_row(str(b.writer.pid), age, f"{ok}/{len(b.probes)}", " ".join(b.writer.argv)[:80])
        _console().print(table)
        for problem in problems:
            print(f"dflash-diag board: note: {shown(problem)}", file=sys.stderr)
        return ExitCode.OK


def _console() -> Console:
    # Markup off: a thread name or an argv like "[red]x[/]" is text from another process, printed as is
    # (already made printable by the reader: no escape sequences reach the terminal).
    return make_console(markup=False)


def board_document(board: Board, now_s: float) -> dict[str, Any]:
    """The board as JSON, plus what the reader concluded (age, staleness)."""
    return {
        "schema": board.schema,
        "writer": {
            "pid": board.writer.pid,
            "start_time_ticks": board.writer.start_time_ticks,
            "argv": list(board.writer.argv),
            "python": board.writer.python,
            "torch": board.writer.torch,
            "hostname": board.writer.hostname,
        },
        "seq": board.seq,
        "wall_time_s": board.wall_time_s,
        "interval_s": board.interval_s,
        "publish_interval_s": board.publish_interval_s,
        "final": board.final,
        "threads": {str(tid): name for tid, name in board.threads.items()},
        "probes": board.probes,
        "app": board.app,
        "session": board.session,
        "reader": {"path": board.path, "age_s": board.age_s(now_s), "stale": staleness(board, now_s)},
    }


def _fmt(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value).lower() if value is not None else "-"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1e5 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, list):
        if not value:
            return "[]"
        shown = ", ".join(_fmt(v) if not isinstance(v, Mapping) else _fmt_map(v) for v in value[-_MAX_LIST_ITEMS:])
        more = f" (+{len(value) - _MAX_LIST_ITEMS} earlier)" if len(value) > _MAX_LIST_ITEMS else ""
        return shown + more
    if isinstance(value, Mapping):
        return _fmt_map(value)
    return str(value)


def _fmt_map(value: Mapping[str, Any]) -> str:
    return "{" + ", ".join(f"{k}: {_fmt(v)}" for k, v in list(value.items())[:8]) + ("…}" if len(value) > 8 else "}")


def _is_table(value: Any) -> bool:
    """A mapping of names to flat mappings (queues, threads, devices, by_thread) renders as a table."""
    return isinstance(value, Mapping) and bool(value) and all(isinstance(v, Mapping) for v in value.values())


def _sub_table(title: str, rows: Mapping[str, Mapping[str, Any]]) -> Table:
    columns: list[str] = []
    for row in rows.values():
        for key, v in row.items():
            if key not in columns and not isinstance(v, (Mapping, list)):
                columns.append(key)
    if len(rows) <= 4 and len(columns) > 6:
        # few entries with many readings (queues, devices): one column per entry reads better
        table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
        table.add_column("")
        for name in rows:
            table.add_column(name, justify="right")
        for col in columns:
            table.add_row(col, *(_fmt(row.get(col)) for row in rows.values()))
        return table
    table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
    table.add_column("name")
    for col in columns:
        table.add_column(col, justify="right")
    for name, row in rows.items():
        table.add_row(name, *(_fmt(row.get(c)) for c in columns))
    return table


def _fmt_scalar(key: str, value: Any, now_s: float) -> str:
    # Wall-clock stamps read better as an age.
    if (key.endswith("wall_s") or key.endswith("_at_s")) and isinstance(value, (int, float)) and value > 1e9:
        return f"{max(0.0, now_s - value):.1f} s ago"
    return _fmt(value)


def _probe_panel(name: str, payload: Mapping[str, Any], now_s: float) -> Panel:
    status = payload.get("status")
    if status != "ok":
        style = "yellow" if status == "na" else "red"
        label = "N/A" if status == "na" else "error"
        return Panel(Text(f"{label}: {payload.get('reason', '')}", style=style), title=name, title_align="left")
    scalars = Table.grid(padding=(0, 2))
    scalars.add_column(style="dim")
    scalars.add_column()
    parts: list[Any] = [scalars]
    top_tables = {k: v for k, v in payload.items() if k != "status" and _is_table(v)}
    if name == "queues":  # queue names are the payload keys: one row per queue
        rows = {k: v for k, v in payload.items() if isinstance(v, Mapping)}
        parts = [_sub_table("", rows)] if rows else [Text("no queue registered", style="dim")]
        return Panel(Group(*parts), title=name, title_align="left")
    for key, value in payload.items():
        if key == "status" or key in top_tables:
            continue
        if isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            rows = {str(i): v for i, v in enumerate(value[-_MAX_LIST_ITEMS:])}
            parts.append(_sub_table(key, rows))
            continue
        scalars.add_row(key, _fmt_scalar(key, value, now_s))
    for key, value in top_tables.items():
        parts.append(_sub_table(key, value))
    return Panel(Group(*parts), title=name, title_align="left")


def render_board(board: Board, now_s: float) -> Group:
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    w = board.writer
    head.add_row("process", f"{w.pid} on {w.hostname}: {' '.join(w.argv)[:200]}")
    head.add_row("versions", f"python {w.python}, torch {w.torch or '-'}")
    head.add_row("board", f"{board.path} (seq {board.seq}, {board.age_s(now_s):.1f} s old)")
    stale = staleness(board, now_s)
    if stale:
        head.add_row("warning", Text(stale, style="bold red"))
    if board.final:
        head.add_row("note", "final publish: the process was exiting")
    threads = ", ".join(f"{name} ({tid})" for tid, name in sorted(board.threads.items()))
    head.add_row("threads", threads)
    if board.app:
        head.add_row("app", _fmt_map({k: v for k, v in board.app.items() if k != "config"}))
    panels = [_probe_panel(name, payload, now_s) for name, payload in sorted(board.probes.items())]
    return Group(head, *panels)
