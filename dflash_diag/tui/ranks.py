"""The job's rows in ``top`` (docs/jobs.md): one line per rank, the selected one marked; its threads are the table
below. Hidden for one process."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from dflash_diag.view.frame import TopFrame

MAX_ROWS = 16  # ranks listed; the rest are counted (`top --batch` lists every one)
_STATE_STYLE = {"stuck": "bold red", "exited": "red", "gone": "red", "moving": "green"}


class RanksPane(Static):
    def show(self, frame: TopFrame) -> None:
        job = frame.job
        self.display = job is not None
        if job is None:
            return
        rows = [job.header, *job.rows]
        widths = [min(48, max(len(r[i]) for r in rows)) for i in range(len(job.header) - 1)]
        text = Text(f"{job.title}   [ ] pick the rank whose threads are shown\n", style="bold")
        for index, row in enumerate(rows[: MAX_ROWS + 1]):
            selected = index - 1 == job.selected
            marker = "> " if selected else "  "
            cells = [c[: widths[i]].ljust(widths[i]) for i, c in enumerate(row[:-1])]
            line = Text(marker + "  ".join(cells) + "  " + row[-1], style="bold" if selected else "")
            if index == 0:
                line.stylize("dim")
            else:
                start = len(marker) + sum(w + 2 for w in widths[:2])
                line.stylize(_STATE_STYLE.get(row[2], ""), start, start + widths[2])
            text.append_text(line)
            text.append("\n")
        if len(job.rows) > MAX_ROWS:
            text.append(f"  ... and {len(job.rows) - MAX_ROWS} more ranks (top --batch lists them all)\n", style="dim")
        self.update(text)
