"""The commands' side of one window: ``observe.observe`` with a progress bar on a terminal (``doctor``, ``record``;
``top --batch`` and ``snapshot`` sample without one). The sampling, the outside evidence and the reachability
check are ``observe``'s; the analysis is ``analysis.analyse`` of what comes back."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dflash_diag.cli._output import console
from dflash_diag.model import Observation
from dflash_diag.model.job import JobObservation
from dflash_diag.observe import Progress, Target, Window, observe


@contextmanager
def progress_bar(label: str, total_s: float, show: bool) -> Iterator[Progress | None]:
    """A transient bar on stderr while a window is sampled (None when ``show`` is off or stderr is no terminal)."""
    if not show or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(TextColumn(label), BarColumn(), TextColumn("{task.completed:.1f}/{task.total:g} s"),
                  TimeRemainingColumn(), transient=True, console=console(stderr=True)) as bar:
        task = bar.add_task("sampling", total=total_s)
        yield lambda done, total: bar.update(task, completed=done)


def observe_shown(target: Target, window: Window, *, show_progress: bool = True,
                  **options: Any) -> Observation | JobObservation:
    """``observe.observe`` of ``target``, with a progress bar on a terminal (``options``: observe's own)."""
    label = f"sampling {len(target.job.ranks)} ranks" if target.job is not None else "sampling PID"
    with progress_bar(label, window.duration_s, show_progress) as progress:
        return observe(target, window, progress, **options)


__all__ = ["observe_shown", "progress_bar"]
