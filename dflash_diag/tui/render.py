"""Rich renderings of frame parts for the TUI (bars, strips, stacks, findings); the plain-text parts are
view/text.py, the words of a finding view/findings.py."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from rich.text import Text

from dflash_diag.model import Frame, ThreadState
from dflash_diag.view.findings import BADGE, SEVERITY_STYLE, TAG_STYLE, Line
from dflash_diag.view.text import STATE_CHAR, STATE_ORDER, STATE_SHORT, STATE_STYLE, dominant, frame_text, pct


def share_bar(shares: Mapping[ThreadState, float], width: int) -> Text:
    """A stacked horizontal bar of state shares, one colored block per state, ``width`` cells wide."""
    text = Text()
    if width <= 0:
        return text
    used = 0
    cumulative = 0.0
    for state in STATE_ORDER:
        cumulative += shares.get(state, 0.0)
        # Rounding the running total (not each part) keeps the bar exactly ``width`` wide.
        end = min(width, round(cumulative * width))
        if end > used:
            text.append(STATE_CHAR[state] * (end - used), style=STATE_STYLE[state])
            used = end
    if used < width:
        text.append(" " * (width - used))
    return text


def dominant_text(shares: Mapping[ThreadState, float]) -> Text:
    top = dominant(shares)
    if top is None:
        return Text("-")
    state, share = top
    return Text(f"{pct(share)} {state.label}", style=STATE_STYLE[state])


def strip(timeline: tuple[ThreadState, ...], width: int) -> Text:
    """The newest ``width`` samples of a thread, one character each, right-aligned so all rows line up in time."""
    text = Text()
    tail = timeline[-width:] if width > 0 else ()
    text.append(" " * (width - len(tail)))
    for state in tail:
        text.append(STATE_CHAR[state], style=STATE_STYLE[state])
    return text


def legend(short: bool = False) -> Text:
    text = Text()
    for state in STATE_ORDER:
        text.append(STATE_CHAR[state], style=STATE_STYLE[state])
        text.append(f" {STATE_SHORT[state] if short else state.label}  ")
    return text


def stack_lines(frames: Iterable[Frame]) -> list[Text]:
    """A stack, innermost first, native frames dimmed and marked."""
    lines: list[Text] = []
    for frame in frames:
        line = Text()
        if frame.native:
            line.append("  [native] ", style="dim")
            line.append(frame_text(frame), style="dim cyan")
        else:
            line.append("  ")
            line.append(frame.name, style="bold")
            where = f"{frame.filename}:{frame.line}" if frame.line else frame.filename
            line.append(f"  {where}", style="dim")
        lines.append(line)
    return lines


def finding_texts(lines: Iterable[Line], *, indent: str = "", one_line: bool = False) -> list[Text]:
    """The Textual adapter of finding lines (view/findings.py): one Text per line, a coloured badge, evidence and
    fix indented under their finding, a blank line before each finding but the first. ``one_line``: each line cut
    to the pane's width and no blank lines (the narrow side pane)."""
    out: list[Text] = []
    for line in lines:
        if line.role == "finding" and out and not one_line:
            out.append(Text())
        text = Text(indent + "    " * line.depth, no_wrap=one_line, overflow="ellipsis" if one_line else "fold")
        for span in line.spans:
            if span.tag == BADGE:
                text.append(f" {span.text} ", style=SEVERITY_STYLE.get(line.severity, ""))
            else:
                text.append(span.text, style=TAG_STYLE.get(span.tag, ""))
        out.append(text)
    return out
