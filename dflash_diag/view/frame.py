"""What ``top`` shows, as one immutable value: the only thing that crosses from the sampler thread to widgets.

A source (:class:`~dflash_diag.tui.source.TopSource`) produces :class:`TopFrame` values; the command wires the
real one (py-spy, /proc, NVML, the board), tests pass a fake. :func:`build_frame` turns an
:class:`~dflash_diag.model.Observation` and its analyses into a frame, so the TUI and batch mode show exactly the
same aggregates. No rich, no Textual: ``top --batch`` uses this package without the TUI.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from dflash_diag.model import (
    NA,
    Board,
    Finding,
    Frame,
    GpuSample,
    Headline,
    Maybe,
    Observation,
    PipelineView,
    StackSample,
    ThreadStats,
)
from dflash_diag.model.waits import WaitGraph
from dflash_diag.view.history import EMPTY_HISTORY, History
from dflash_diag.view.job import JobView


@dataclass(frozen=True, slots=True)
class TopFrame:
    """Everything one screen refresh (or one batch report) shows."""

    pid: int
    cmdline: tuple[str, ...]
    wall_s: float  # when the frame was built (time.time() of the sampling process)
    window_s: float  # how much history the aggregates cover
    rate_hz: float  # the sampling rate in force
    native: bool  # native frames requested
    n_samples: int  # stack samples in the window
    threads: tuple[ThreadStats, ...]
    pipeline: Maybe[PipelineView]
    gpus: Maybe[tuple[GpuSample, ...]]  # the newest NVML sweep
    board: Maybe[Board]
    findings: Maybe[tuple[Finding, ...]]
    # Newest stack of each thread, keyed by :func:`thread_key`; native stacks only from native samples.
    stacks: Mapping[str, tuple[Frame, ...]] = field(default_factory=dict)
    native_stacks: Mapping[str, tuple[Frame, ...]] = field(default_factory=dict)
    process_alive: bool = True
    warnings: tuple[str, ...] = ()
    requested_rate_hz: float | None = None  # the rate asked for; None: auto (the sampler picks it)
    rate_reason: str = ""  # why the rate in force is what it is ("auto: 3.1 idle cores", "py-spy dumps cost ...")
    # tok/s, queue depth and GPU utilisation over the last minutes, folded in by the live source (view/history.py)
    history: History = EMPTY_HISTORY
    headline: Headline | None = None  # the analysis' one sentence: the symptom and its cause
    waits: Maybe[WaitGraph] = NA("not analysed yet")  # the wait-for graph (the Waits tab)
    # A job (docs/jobs.md): one row per rank; the threads above are the selected rank's. None: one process.
    job: JobView | None = None


def thread_key(name: str | None, os_thread_id: int | None) -> str:
    """A stable key for one thread across frames: the native TID when known, else its name."""
    return f"tid:{os_thread_id}" if os_thread_id is not None else f"name:{name or '?'}"


def stats_key(stats: ThreadStats) -> str:
    return thread_key(stats.name, stats.os_thread_id)


def latest_stacks(stacks: tuple[StackSample, ...], native: bool) -> dict[str, tuple[Frame, ...]]:
    """The newest stack of every thread seen in ``stacks`` (only native samples when ``native``)."""
    newest: dict[str, tuple[Frame, ...]] = {}
    for sample in stacks:
        if native and not sample.native:
            continue
        for thread in sample.threads:
            newest[thread_key(thread.name, thread.os_thread_id)] = thread.frames
    return newest


def newest_gpus(obs: Observation) -> Maybe[tuple[GpuSample, ...]]:
    if isinstance(obs.gpus, NA):
        return obs.gpus
    if not obs.gpus:
        return NA("no NVML reading yet")
    return obs.gpus[-1]


def newest_board(obs: Observation) -> Maybe[Board]:
    if isinstance(obs.boards, NA):
        return obs.boards
    board = obs.board
    if board is not None:
        return board
    return NA(f"no probe board published by this process: `dflash-diag attach {obs.pid}` adds the probes to it")


def build_frame(
    obs: Observation,
    threads: tuple[ThreadStats, ...],
    pipeline: Maybe[PipelineView],
    findings: Maybe[tuple[Finding, ...]],
    *,
    wall_s: float,
    rate_hz: float,
    native: bool,
    extra_warnings: tuple[str, ...] = (),
) -> TopFrame:
    """Assemble a frame from one observation and its analyses (pure: ``wall_s`` is passed in)."""
    return TopFrame(
        pid=obs.pid,
        cmdline=obs.cmdline,
        wall_s=wall_s,
        window_s=obs.window_s,
        rate_hz=rate_hz,
        native=native,
        n_samples=len(obs.stacks),
        threads=threads,
        pipeline=pipeline,
        gpus=newest_gpus(obs),
        board=newest_board(obs),
        findings=findings,
        # Read-only views: the frame crosses from the sampler thread to the UI and must not change underneath it.
        stacks=MappingProxyType(latest_stacks(obs.stacks, native=False)),
        native_stacks=MappingProxyType(latest_stacks(obs.stacks, native=True)),
        process_alive=obs.process_alive,
        warnings=obs.warnings + extra_warnings,
    )
