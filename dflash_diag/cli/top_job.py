"""``top`` of a job (docs/jobs.md): one row per rank, and the threads of the rank picked with ``[`` / ``]``.

Batch mode samples every rank over one window (the job collector ``doctor`` uses) and prints the rows, the job's
findings and each rank's own report. The live view keeps one live sampler per rank, each at a share of the
sampling budget (``RANK_LIVE_HZ`` stacks a second for the job, at least ``MIN_RANK_LIVE_HZ`` per rank, unless a
rate is asked for), and every refresh analyses the job from their windows.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import Any

from dflash_diag.analysis.job import analyse_job
from dflash_diag.analysis.threads import StagePatterns
from dflash_diag.errors import AttachError, CommandError, ExitCode
from dflash_diag.model import NA, Observation
from dflash_diag.model.job import JobAnalysis, JobObservation, JobTopology
from dflash_diag.sources.collect import LiveSampler
from dflash_diag.sources.config import SamplerConfig
from dflash_diag.sources.outside import OutsideReader
from dflash_diag.view.frame import TopFrame
from dflash_diag.view.job import RANK_HEADER, JobView, job_json, job_title, rank_lines, rank_rows

RANK_LIVE_HZ = 4.0  # stacks a second for the whole job in the live view (the single-process view's 2-10 Hz)
MIN_RANK_LIVE_HZ = 0.5


def rank_frames(analysis: JobAnalysis, *, wall_s: float, rate_hz: float, native: bool) -> tuple[TopFrame, ...]:
    """Each rank's own frame (its threads, stages, findings), as ``top`` shows one process."""
    from dflash_diag.cli.top_live import _frame

    return tuple(_frame(obs, a, wall_s=wall_s, rate_hz=rate_hz, native=native)
                 for obs, a in zip(analysis.observation.ranks, analysis.ranks, strict=True))


def job_view(analysis: JobAnalysis, selected: int) -> JobView:
    return JobView(title=job_title(analysis), header=RANK_HEADER, rows=tuple(rank_rows(analysis)),
                   selected=max(0, min(selected, len(analysis.summaries) - 1)))


def job_frame(analysis: JobAnalysis, frames: tuple[TopFrame, ...], selected: int) -> TopFrame:
    """The frame the screen shows: the selected rank's threads, the job's headline, findings and rows."""
    view = job_view(analysis, selected)
    rank = frames[view.selected]
    alive = any(o.process_alive for o in analysis.observation.ranks)
    return replace(rank, findings=analysis.findings, headline=analysis.headline, job=view, process_alive=alive)


def collect_job(topology: JobTopology, duration_s: float, config: SamplerConfig,
                patterns: StagePatterns) -> tuple[JobAnalysis, tuple[TopFrame, ...], float | None]:
    """Batch mode: every rank over one window, analysed as a job."""
    from dflash_diag.cli._job import observe_job

    observed = observe_job(topology, duration_s, config, patterns=patterns)
    frames = rank_frames(observed.analysis, wall_s=time.time(), rate_hz=observed.rank_rate_hz or 0.0,
                         native=config.native)
    return observed.analysis, frames, observed.rank_rate_hz


def batch_json(analysis: JobAnalysis, frames: tuple[TopFrame, ...]) -> dict[str, Any]:
    from dflash_diag.view.job import finding_row
    from dflash_diag.view.report import JSON_SCHEMA, frame_to_json

    headline = analysis.headline
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


def batch_text(analysis: JobAnalysis, frames: tuple[TopFrame, ...]) -> str:
    from dflash_diag.view.report import frame_to_text

    out = [f"dflash-diag top - {job_title(analysis)}", "", "RANKS", *(f"  {line}" for line in rank_lines(analysis))]
    out += ["", "JOB FINDINGS"]
    if analysis.headline is not None:
        out.append(f"  headline: {analysis.headline.text}")
    for f in analysis.findings:
        out.append(f"  [{f.severity.label}] {f.claim} ({f.rule_id})")
    if not analysis.findings:
        out.append("  none")
    for s, frame in zip(analysis.summaries, frames, strict=True):
        out += ["", f"===== {s.identity.label} (PID {s.identity.pid}) =====", frame_to_text(frame).rstrip("\n")]
    return "\n".join(out) + "\n"


def live_rank_config(config: SamplerConfig, n_ranks: int) -> SamplerConfig:
    """A share of the live budget per rank when no rate was asked for."""
    if config.rate_hz is not None or n_ranks <= 1:
        return config
    return replace(config, rate_hz=max(MIN_RANK_LIVE_HZ, RANK_LIVE_HZ / n_ranks), adaptive=True)


class JobLiveSource:
    """A :class:`~dflash_diag.tui.source.TopSource` over every rank of a job; ``select_rank`` picks whose threads."""

    def __init__(self, topology: JobTopology, config: SamplerConfig, patterns: StagePatterns) -> None:
        self._topology = topology
        self._patterns = patterns
        config = live_rank_config(config, len(topology.ranks))
        self._config = config
        self._samplers = [LiveSampler(r.pid, config) for r in topology.ranks]
        self._outside = [OutsideReader(r.pid) for r in topology.ranks]
        self._lock = threading.Lock()  # the selection and native flag change on the UI thread
        self._selected = 0
        self._native = config.native

    @property
    def pid(self) -> int:
        return self._topology.launcher_pid or self._topology.asked_pid

    @property
    def rate_hz(self) -> float | None:
        return self._samplers[0].rate_hz if self._samplers else None

    def select_rank(self, step: int) -> int:
        """Move the selection by ``step`` ranks (wrapping); returns the new index."""
        with self._lock:
            self._selected = (self._selected + step) % max(1, len(self._samplers))
            return self._selected

    def poll(self) -> TopFrame:
        observations: list[Observation] = []
        for rank, sampler, outside in zip(self._topology.ranks, self._samplers, self._outside, strict=True):
            try:
                obs = outside.enrich(sampler.poll())
            except AttachError as exc:
                obs = Observation(pid=rank.pid, cmdline=(), started_wall_s=time.time(), window_s=0.0, stacks=(),
                                  proc=(), gpus=NA("not sampled"), boards=NA("not sampled"), process_alive=False,
                                  warnings=(f"{rank.label}: {exc}",))
            observations.append(obs)
        now = time.time()
        job = JobObservation(topology=self._topology, ranks=tuple(observations), started_wall_s=now,
                             window_s=max((o.window_s for o in observations), default=0.0), launcher_alive=None,
                             warnings=self._topology.notes)
        analysis = analyse_job(job, self._patterns, now_wall_s=now)
        with self._lock:
            native, selected = self._native, self._selected
        rate = self._samplers[selected].effective_rate_hz if self._samplers else 0.0
        frames = rank_frames(analysis, wall_s=now, rate_hz=rate, native=native)
        if not any(o.process_alive or o.stacks for o in observations):
            raise AttachError(f"every rank of the job of PID {self.pid} exited", ExitCode.NO_PROCESS)
        return job_frame(analysis, frames, selected)

    def set_rate(self, rate_hz: float | None) -> float | None:
        out = None
        for sampler in self._samplers:
            out = sampler.set_rate(rate_hz)
        return out

    def set_native(self, native: bool) -> bool:
        with self._lock:
            self._native = native
        for sampler in self._samplers:
            sampler.set_native(native)
        return native

    def write_snapshot(self) -> str:
        try:
            from dflash_diag.snapshot import take_snapshot
        except ImportError:
            raise CommandError("snapshots are not available in this build", ExitCode.FAILURE) from None
        return str(take_snapshot(self.pid).path.resolve())

    def close(self) -> None:
        for sampler in self._samplers:
            sampler.close()


__all__ = ["JobLiveSource", "batch_json", "batch_text", "collect_job", "job_frame", "live_rank_config",
           "rank_frames"]
