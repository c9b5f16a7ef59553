"""Observe one process for a window and diagnose it: the one path ``doctor``, ``top --batch`` and ``record`` take.

Sampling (``sources.collect``), the outside evidence (``sources.outside``: /proc state, stderr, the source files,
the children's lines) and the one analysis (``analysis.analyse``: thread states, the wait-for graph, every rule,
the causal links and warm-up held back). ``snapshot`` gathers its window in a job of its own beside the other
parts of a bundle, with the same collector and reader, and analyses it with the same ``analyse``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dflash_diag.cli._output import console
from dflash_diag.errors import AttachError, ExitCode
from dflash_diag.model import Analysis, Observation
from dflash_diag.sources.config import BURST_RATE_HZ, SamplerConfig

if TYPE_CHECKING:  # the commands import this module to build their parsers: the sampler and analysis load on use
    from dflash_diag.analysis.threads import StagePatterns
    from dflash_diag.sources.collect import Collector

# A one-off window the user asked for (doctor, record, snapshot): 20 stack samples a second with py-spy allowed half
# a core (never pausing the process: --nonblocking), for windows up to BURST_MAX_S. At the live sampler's 2 Hz, a
# busy 2-core box gave 9 samples in 5 s: too few to tell a recompile storm from warm-up. Longer windows, and
# --rate, get the live budget (a tenth of a core).
BURST_MAX_S = 30.0


def sampler_config(duration_s: float, rate_hz: float | None, board_dir: str | None, *,
                   native: bool = False) -> SamplerConfig:
    """A burst for a short window nobody asked a rate for; else the rate asked (or auto) on the live budget."""
    if rate_hz is None and duration_s <= BURST_MAX_S:
        return SamplerConfig(rate_hz=BURST_RATE_HZ, burst=True, board_dir=board_dir, native=native)
    return SamplerConfig(rate_hz=rate_hz, board_dir=board_dir, native=native)


@dataclass(frozen=True)
class Observed:
    observation: Observation
    analysis: Analysis
    rate_hz: float  # the stack rate in force at the end of the window
    rate_reason: str


def observe(pid: int, duration_s: float, config: SamplerConfig, *, progress: bool = False,
            patterns: StagePatterns | None = None, require_stacks: bool = True,
            until: Callable[[], bool] | None = None,
            finish: Callable[[Observation], Observation] | None = None) -> Observed:
    """Sample ``pid`` for ``duration_s`` (a progress bar on a terminal), add the outside evidence, analyse.
    With ``require_stacks``, AttachError(NO_PROCESS) when not one stack sample could be taken of a process that
    could run (``top --batch`` reports such a window as it is). ``until``: the window ends early once it says so;
    ``finish``: adds evidence gathered beside the window before the analysis (``record --kernels``' trace)."""
    from dflash_diag.analysis import analyse
    from dflash_diag.sources.collect import Collector
    from dflash_diag.sources.outside import OutsideReader

    collector = Collector(pid, config)
    obs = OutsideReader(pid).enrich(collect_with_progress(collector, duration_s, progress, until))
    if finish is not None:
        obs = finish(obs)
    if require_stacks and not obs.stacks and (obs.process is None or obs.process.state not in ("Z", "T", "t", "D")):
        raise AttachError(f"no stack sample of PID {pid} could be taken in {duration_s:g} s "
                          f"({'; '.join(obs.warnings) or 'the process exited'})", ExitCode.NO_PROCESS)
    analysis = analyse(obs, patterns, now_wall_s=time.time())
    return Observed(obs, analysis, collector.effective_rate_hz, collector.rate_reason)


def collect_with_progress(collector: Collector, duration_s: float, progress: bool,
                          until: Callable[[], bool] | None = None) -> Observation:
    if not progress or not sys.stderr.isatty():
        return collector.collect(duration_s, until=until)
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(TextColumn("sampling PID"), BarColumn(), TextColumn("{task.completed:.1f}/{task.total:g} s"),
                  TimeRemainingColumn(), transient=True, console=console(stderr=True)) as bar:
        task = bar.add_task("sampling", total=duration_s)
        return collector.collect(duration_s, progress=lambda done, total: bar.update(task, completed=done), until=until)
