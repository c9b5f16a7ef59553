"""The per-thread state timeline picture (plain SVG text: no plotting dependency)."""

from __future__ import annotations

from collections.abc import Sequence
from xml.sax.saxutils import escape

from dflash_diag.model import ThreadState, ThreadStats

COLORS: dict[ThreadState, str] = {
    ThreadState.PYTHON: "#f2c14e",
    ThreadState.NATIVE: "#4caf50",
    ThreadState.GPU_WAIT: "#e4572e",
    ThreadState.GIL_WAIT: "#a23b72",
    ThreadState.QUEUE_PUT: "#2e86ab",
    ThreadState.QUEUE_GET: "#7fb7d9",
    ThreadState.COMPILE: "#8e44ad",
    ThreadState.CHECKPOINT: "#ff8c42",
    ThreadState.IDLE: "#d0d0d0",
}
ROW_H = 18
LABEL_W = 190
PLOT_W = 640
LEGEND_H = 40
MAX_ROWS = 256


def timeline_svg(threads: Sequence[ThreadStats], *, title: str, window_s: float) -> str:
    """One row per thread, one cell per sample coloured by state; a legend; the window length."""
    rows = [t for t in threads if t.timeline][:MAX_ROWS]
    height = 30 + max(1, len(rows)) * ROW_H + LEGEND_H
    width = LABEL_W + PLOT_W + 20
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="monospace" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="6" y="16" font-size="12">{escape(title)} ({window_s:.1f} s window)</text>',
    ]
    if not rows:
        out.append('<text x="6" y="40">no thread samples were taken</text>')
    for i, thread in enumerate(rows):
        y = 26 + i * ROW_H
        label = f"{thread.name} [{thread.stage}]"
        out.append(f'<text x="6" y="{y + 12}">{escape(label[:28])}</text>')
        n = len(thread.timeline)
        cell_w = PLOT_W / n
        # Merge runs of one state into one rectangle: smaller file, no hairline gaps.
        start = 0
        for j in range(1, n + 1):
            if j == n or thread.timeline[j] != thread.timeline[start]:
                state = thread.timeline[start]
                x = LABEL_W + start * cell_w
                out.append(
                    f'<rect x="{x:.1f}" y="{y}" width="{(j - start) * cell_w:.1f}" height="{ROW_H - 3}" '
                    f'fill="{COLORS.get(state, "#999")}"><title>{escape(state.label)}</title></rect>'
                )
                start = j
    legend_y = 30 + max(1, len(rows)) * ROW_H
    x = 6
    for state, color in COLORS.items():
        out.append(f'<rect x="{x}" y="{legend_y}" width="10" height="10" fill="{color}"/>')
        out.append(f'<text x="{x + 13}" y="{legend_y + 9}">{escape(state.label)}</text>')
        x += 14 + 7 * len(state.label) + 10
        if x > width - 90:
            x, legend_y = 6, legend_y + 16
    out.append("</svg>")
    return "\n".join(out) + "\n"
