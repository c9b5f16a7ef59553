"""What every command prints goes through here: one-line safe text, redacted JSON, quiet on a closed pipe.

- :func:`shown`: a value from another process or from the user (a path, argv, a name) as one printable line.
- :func:`dump_json`: a JSON document with every string through the one redactor once more (a last gate:
  whatever a source forgot, a token format, URL password or ``password=...`` never reaches stdout) and made
  printable. Keys are our schema's and stay.
- :class:`OneLineParser`: argparse that reports a bad argument in one line (and ``--help``), exit code 2.
- :func:`console`: the Rich console every command prints with; a closed pipe raises BrokenPipeError like
  ``print`` does (Rich's own answer is ``SystemExit(1)``), so ``main`` ends every command the same way (141).
- :func:`print_lines`: the rich adapter of a finding's lines (``view/findings.py``): ``doctor``'s findings.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Iterable
from typing import IO, Any, NoReturn

from dflash_contract.proc import PID_MAX
from dflash_contract.redact import redact_strings
from dflash_diag.errors import ExitCode
from dflash_diag.model.text import printable, printable_tree
from dflash_diag.view.findings import BADGE, LABEL, SEVERITY_STYLE, TAG_STYLE, VALUE, Line

# Piped (to a file, `less`, `grep`), a table is as wide as its rows: Rich's default of 80 columns off a terminal
# folded `diff`'s rows. COLUMNS, when set, still wins.
PIPED_WIDTH = 4096


def console(*, stderr: bool = False, markup: bool = True, soft_wrap: bool = False, wide_when_piped: bool = False) -> Any:
    """A Rich console (imported lazily: `--help` must not need Rich) that reports a closed pipe as an error.
    ``wide_when_piped``: off a terminal (and without COLUMNS), lines are as long as they need to be."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError

    stream = sys.stderr if stderr else sys.stdout
    piped = not (hasattr(stream, "isatty") and stream.isatty()) and not os.environ.get("COLUMNS")
    width = PIPED_WIDTH if wide_when_piped and piped else None
    return _Console(stderr=stderr, highlight=False, soft_wrap=soft_wrap, markup=markup, width=width)


_INDENT = "    "


def print_lines(out: Any, lines: Iterable[Line]) -> None:
    """Draw finding lines on a Rich console: a coloured badge, evidence as an aligned two-column grid, a blank
    line before each finding. Text objects, never markup, so a claim's ``[brackets]`` print as they are."""
    from rich.table import Table
    from rich.text import Text

    grid: Table | None = None
    for line in lines:
        if line.role == "evidence":
            if grid is None:
                grid = Table.grid(padding=(0, 2))
                grid.add_column(style=TAG_STYLE[LABEL], no_wrap=True)
                grid.add_column()
            grid.add_row(_INDENT * line.depth + line.tagged(LABEL), line.tagged(VALUE))
            continue
        if grid is not None:
            out.print(grid)
            grid = None
        if line.role == "finding":
            out.print()
        text = Text(_INDENT * line.depth)
        for span in line.spans:
            if span.tag == BADGE:
                text.append(f" {span.text} ", style=SEVERITY_STYLE.get(line.severity, ""))
            else:
                text.append(span.text, style=TAG_STYLE.get(span.tag, ""))
        out.print(text)
    if grid is not None:
        out.print(grid)


def shown(value: object) -> str:
    return printable(str(value))


def dump_json(doc: Any, file: IO[str] | None = None) -> None:
    out = sys.stdout if file is None else file
    json.dump(printable_tree(redact_strings(doc)), out, indent=1, allow_nan=False, default=str)
    out.write("\n")
    out.flush()


class OneLineParser(argparse.ArgumentParser):
    """Usage errors in one line: ``dflash-diag CMD: error: WHAT (see dflash-diag CMD --help)``, exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(ExitCode.USAGE, f"{shown(self.prog)}: error: {shown(message)} (see {shown(self.prog)} --help)\n")


def pid_arg(text: str) -> int:
    """A PID on the command line: digits only, 1 .. 4194304 (a larger number is never a Linux PID)."""
    stripped = text.strip()
    if not (stripped.isascii() and stripped.isdigit()) or len(stripped) > 8:
        raise argparse.ArgumentTypeError(f"PID must be a number from 1 to {PID_MAX}, not {shown(text)[:40]!r}")
    pid = int(stripped)
    if not 1 <= pid <= PID_MAX:
        raise argparse.ArgumentTypeError(f"PID must be a number from 1 to {PID_MAX}, not {pid}")
    return pid


def rate_arg(text: str) -> float | None:
    """``--rate``: 'auto' (None) or a number of Hz (each command range-checks it with a one-line error)."""
    if text.strip().lower() == "auto":
        return None
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of Hz or 'auto', got {text!r}") from None


def finite_float(text: str) -> float:
    """A number of seconds or hertz: finite (``1e999``, ``inf`` and ``nan`` are refused)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {shown(text)[:40]!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{shown(text)[:40]!r} is not a finite number")
    return value


def output_path_arg(text: str) -> str:
    """A path to write (``-o``, ``--screenshot``, ``--child-log``): never empty (``-o ""`` must not quietly mean
    the default name) and without a NUL character (no file system takes one)."""
    if not text:
        raise argparse.ArgumentTypeError("the path is empty: give a file name (or leave the option out)")
    if "\0" in text:
        raise argparse.ArgumentTypeError("the path holds a NUL character")
    return text
