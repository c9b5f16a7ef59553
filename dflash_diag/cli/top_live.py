"""``top``'s real data: a target (one process, or every rank of a job: docs/jobs.md) observed live or over one
window, analysed, as frames.

The command wires this, not the TUI (as memray's ``commands/live.py`` builds the reader its TUI gets): the app
only receives :class:`TopFrame` values through :class:`~dflash_diag.tui.source.TopSource`. Batch mode
(:func:`batch_report`) runs the same analysis over one window (``observe.observe``, as ``doctor``), so the screen
and ``--batch`` agree. A job's frame shows the threads of the rank picked with ``[`` / ``]``, above them one row
per rank, and the job's findings.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import Any

from dflash_diag.analysis import analyse
from dflash_diag.errors import CommandError, ExitCode
from dflash_diag.model import NA, Analysis, Finding, Maybe, Observation
from dflash_diag.model.job import JobAnalysis, JobObservation
from dflash_diag.observe import Target, Window, observe
from dflash_diag.observe.live import LiveObserver
from dflash_diag.view.frame import TopFrame, build_frame
from dflash_diag.view.history import EMPTY_HISTORY, extend
from dflash_diag.view.hold import FindingHold
from dflash_diag.view.job import RANK_HEADER, JobView, job_json, job_title, rank_lines, rank_rows

HOLD_MAX_S = 10.0


def process_frame(analysis: Analysis, *, native: bool) -> TopFrame:
    """One process's frame, from its analysis (:func:`dflash_diag.analysis.analyse`, the one ``doctor`` and
    ``snapshot`` use). An analysis that failed is an N/A pane with the reason, never a dead screen."""
    obs = analysis.observation
    findings: Maybe[tuple[Finding, ...]] = (
        analysis.findings if not isinstance(analysis.pipeline, NA) else NA("no pipeline view to judge"))
    frame = build_frame(obs, analysis.threads, analysis.pipeline, findings, wall_s=obs.judged_at_wall_s,
                        rate_hz=obs.rate_hz or 0.0, native=native, extra_warnings=analysis.errors)
    return replace(frame, headline=analysis.headline, waits=analysis.waits, rate_reason=obs.rate_reason)


def rank_frames(analysis: JobAnalysis, *, native: bool) -> tuple[TopFrame, ...]:
    """Each rank's own frame (its threads, stages, findings), as ``top`` shows one process."""
    return tuple(process_frame(a, native=native) for a in analysis.ranks)


def job_view(analysis: JobAnalysis, selected: int) -> JobView:
    return JobView(title=job_title(analysis), header=RANK_HEADER, rows=tuple(rank_rows(analysis)),
                   selected=max(0, min(selected, len(analysis.summaries) - 1)))


def job_frame(analysis: JobAnalysis, frames: tuple[TopFrame, ...], selected: int) -> TopFrame:
    """The frame the screen shows: the selected rank's threads, the job's headline, findings and rows."""
    view = job_view(analysis, selected)
    rank = frames[view.selected]
    alive = any(o.process_alive for o in analysis.observation.ranks)
    return replace(rank, findings=analysis.findings, headline=analysis.headline, job=view, process_alive=alive)


def frame_of(analysis: Analysis | JobAnalysis, *, native: bool, selected: int = 0) -> TopFrame:
    """The frame of a process's analysis, or of a job's (its ``selected`` rank's threads)."""
    if isinstance(analysis, JobAnalysis):
        return job_frame(analysis, rank_frames(analysis, native=native), selected)
    return process_frame(analysis, native=native)


# --- batch mode ---------------------------------------------------------------------------------------------------


def batch_report(target: Target, window: Window) -> tuple[Analysis | JobAnalysis, TopFrame]:
    """Batch mode: the target over one window (a window with no stack sample is reported as it is), analysed."""
    analysis = analyse(observe(target, window, require_stacks=False))
    frame = frame_of(analysis, native=window.native)
    return analysis, replace(frame, requested_rate_hz=window.rate_hz)


def batch_document(analysis: Analysis | JobAnalysis, frame: TopFrame) -> dict[str, Any]:
    """``top --batch --json`` (docs/top.md): one process's frame; a job's rows, findings and each rank's frame."""
    from dflash_diag.view.job import finding_row
    from dflash_diag.view.report import JSON_SCHEMA, frame_to_json

    if isinstance(analysis, Analysis):
        return frame_to_json(frame)
    headline = analysis.headline
    frames = rank_frames(analysis, native=frame.native)
    return {
        "schema": JSON_SCHEMA, "kind": "job", "phase": analysis.phase,
        "headline": None if headline is None else {"rule_id": headline.rule_id, "severity": headline.severity.label,
                                                   "text": headline.text, "remedy": headline.remedy},
        "findings": [finding_row(f) for f in analysis.findings],
        "job": job_json(analysis),
        "ranks": [{"rank": s.identity.rank, "pid": s.identity.pid, "frame": frame_to_json(f)}
                  for s, f in zip(analysis.summaries, frames, strict=True)],
        "warnings": list(analysis.observation.warnings) + list(analysis.errors),
    }


def batch_lines(analysis: Analysis | JobAnalysis, frame: TopFrame) -> str:
    """``top --batch``'s text: one process's frame; a job's rows, findings and each rank's report."""
    from dflash_diag.view.report import frame_to_text

    if isinstance(analysis, Analysis):
        return frame_to_text(frame)
    out = [f"dflash-diag top - {job_title(analysis)}", "", "RANKS", *(f"  {line}" for line in rank_lines(analysis))]
    out += ["", "JOB FINDINGS"]
    if analysis.headline is not None:
        out.append(f"  headline: {analysis.headline.text}")
    for f in analysis.findings:
        out.append(f"  [{f.severity.label}] {f.claim} ({f.rule_id})")
    if not analysis.findings:
        out.append("  none")
    for s, rank in zip(analysis.summaries, rank_frames(analysis, native=frame.native), strict=True):
        out += ["", f"===== {s.identity.label} (PID {s.identity.pid}) =====", frame_to_text(rank).rstrip("\n")]
    return "\n".join(out) + "\n"


# --- the live view ------------------------------------------------------------------------------------------------


class LiveSource:
    """The live view's :class:`~dflash_diag.tui.source.TopSource` over a target; ``poll`` runs on the app's sampler
    thread. Of a job, ``select_rank`` picks whose threads the frame holds."""

    def __init__(self, target: Target, window: Window, history_s: float) -> None:
        self._target = target
        self._observer = LiveObserver(target, window, history_s)
        self._lock = threading.Lock()  # rate/native/rank change from the UI thread while poll runs on the sampler
        self._native = window.native
        self._selected = 0
        # A finding stays a third of the window (at most 10 s) after it was last raised: no flicker.
        self._hold = FindingHold(hold_s=min(HOLD_MAX_S, history_s / 3))
        self._history = EMPTY_HISTORY  # only the sampler thread (poll) reads and replaces it
        self._bottleneck = ""  # the stage the last frame named: the next verdict's hysteresis (sampler thread only)

    @property
    def pid(self) -> int:
        job = self._target.job
        return job.launcher_pid or job.asked_pid if job is not None else self._target.pid

    @property
    def rate_hz(self) -> float | None:
        """The rate asked for (None: auto)."""
        return self._observer.rate_hz

    def select_rank(self, step: int) -> int | None:
        """A job: move the selection by ``step`` ranks (wrapping) and return the new index; one process: None."""
        job = self._target.job
        if job is None:
            return None
        with self._lock:
            self._selected = (self._selected + step) % max(1, len(job.ranks))
            return self._selected

    def poll(self) -> TopFrame:
        obs = self._observer.poll()
        with self._lock:
            native, selected = self._native, self._selected
        # The stage the last frame named: near-equal waits keep it shown instead of flipping (the live verdict's
        # hysteresis; a job's frame is its ranks', each judged alone).
        analysis = analyse(obs, previous_bottleneck=self._bottleneck)
        if isinstance(analysis, Analysis) and not isinstance(analysis.pipeline, NA):
            self._bottleneck = analysis.pipeline.bottleneck
        frame = frame_of(analysis, native=native, selected=selected)
        frame = replace(frame, requested_rate_hz=self._observer.rate_hz,
                        findings=self._hold.update(frame.findings, time.monotonic()))
        if _alive(obs):  # after the exit the window freezes: no new points
            self._history = extend(self._history, frame)
        return replace(frame, history=self._history)

    def set_rate(self, rate_hz: float | None) -> float | None:
        return self._observer.set_rate(rate_hz)

    def set_native(self, native: bool) -> bool:
        with self._lock:
            self._native = native
        return self._observer.set_native(native)

    def write_snapshot(self) -> str:
        """A bug-report bundle in the current directory (``dflash-diag snapshot``'s default name)."""
        try:
            from dflash_diag.snapshot import take_snapshot
        except ImportError:
            raise CommandError("snapshots are not available in this build", ExitCode.FAILURE) from None
        return str(take_snapshot(self._target).path.resolve())

    def close(self) -> None:
        self._observer.close()


def _alive(obs: Observation | JobObservation) -> bool:
    return any(o.process_alive for o in obs.ranks) if isinstance(obs, JobObservation) else obs.process_alive


__all__ = ["LiveSource", "batch_document", "batch_lines", "batch_report", "frame_of", "job_frame", "process_frame",
           "rank_frames"]
