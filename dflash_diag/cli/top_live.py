"""``top``'s real data: the live sampler (py-spy, /proc, NVML, board) plus the analyses, as frames.

The command wires this, not the TUI (as memray's ``commands/live.py`` builds the reader its TUI gets): the app
only receives :class:`TopFrame` values through :class:`~dflash_diag.tui.source.TopSource`. Batch mode uses
:func:`collect_frame`, which runs the same analyses over one fixed window, so the screen and ``--batch`` agree.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace

from dflash_diag.analysis import analyse
from dflash_diag.analysis.threads import StagePatterns
from dflash_diag.errors import AttachError, CommandError, ExitCode
from dflash_diag.model import NA, Analysis, Finding, Maybe, Observation
from dflash_diag.sources.collect import LiveSampler
from dflash_diag.sources.config import SamplerConfig
from dflash_diag.sources.outside import OutsideReader
from dflash_diag.view.frame import TopFrame, build_frame
from dflash_diag.view.history import EMPTY_HISTORY, extend
from dflash_diag.view.hold import FindingHold

HOLD_MAX_S = 10.0


def frame_of(
    obs: Observation, patterns: StagePatterns, *, wall_s: float, rate_hz: float, native: bool,
    previous_bottleneck: str = "",
) -> TopFrame:
    """Observation -> frame, through the one analysis ``doctor`` and ``snapshot`` use
    (:func:`dflash_diag.analysis.analyse`). An analysis that fails becomes an N/A pane with the reason, never a
    dead screen. ``previous_bottleneck``: the stage the last frame named (the live verdict's hysteresis)."""
    analysis = analyse(obs, patterns, now_wall_s=wall_s, previous_bottleneck=previous_bottleneck)
    return _frame(obs, analysis, wall_s=wall_s, rate_hz=rate_hz, native=native)


def _frame(obs: Observation, analysis: Analysis, *, wall_s: float, rate_hz: float, native: bool) -> TopFrame:
    findings: Maybe[tuple[Finding, ...]] = (
        analysis.findings if not isinstance(analysis.pipeline, NA) else NA("no pipeline view to judge"))
    frame = build_frame(obs, analysis.threads, analysis.pipeline, findings, wall_s=wall_s, rate_hz=rate_hz,
                        native=native, extra_warnings=analysis.errors)
    return replace(frame, headline=analysis.headline, waits=analysis.waits)


def collect_frame(pid: int, duration_s: float, config: SamplerConfig, patterns: StagePatterns) -> TopFrame:
    """Batch mode: sample for ``duration_s`` and analyse the whole run as one window."""
    from dflash_diag.cli._observe import observe

    observed = observe(pid, duration_s, config, patterns=patterns, require_stacks=False)
    frame = _frame(observed.observation, observed.analysis, wall_s=time.time(), rate_hz=observed.rate_hz,
                   native=config.native)
    return replace(frame, requested_rate_hz=config.rate_hz, rate_reason=observed.rate_reason)


class LiveSource:
    """Wraps the rolling-window live sampler; ``poll`` runs on the app's sampler thread."""

    def __init__(self, pid: int, config: SamplerConfig, patterns: StagePatterns) -> None:
        self._pid = pid
        self._patterns = patterns
        self._outside = OutsideReader(pid)  # process state, stderr, source files: read on every poll (cached)
        self._lock = threading.Lock()  # rate/native change from the UI thread while poll runs on the sampler
        self._native = config.native
        self._sampler = LiveSampler(pid, config)
        # A finding stays a third of the window (at most 10 s) after it was last raised: no flicker.
        self._hold = FindingHold(hold_s=min(HOLD_MAX_S, config.window_s / 3))
        self._history = EMPTY_HISTORY  # only the sampler thread (poll) reads and replaces it
        self._bottleneck = ""  # the stage the last frame named: the next verdict's hysteresis (sampler thread only)

    @property
    def pid(self) -> int:
        return self._pid

    @property
    def rate_hz(self) -> float | None:
        """The rate asked for (None: auto)."""
        return self._sampler.rate_hz

    def poll(self) -> TopFrame:
        obs = self._outside.enrich(self._sampler.poll())
        with self._lock:
            native = self._native
        sampler = self._sampler
        frame = frame_of(obs, self._patterns, wall_s=time.time(), rate_hz=sampler.effective_rate_hz, native=native,
                         previous_bottleneck=self._bottleneck)
        if not isinstance(frame.pipeline, NA):
            self._bottleneck = frame.pipeline.bottleneck
        frame = replace(frame, requested_rate_hz=sampler.rate_hz, rate_reason=sampler.rate_reason,
                        findings=self._hold.update(frame.findings, time.monotonic()))
        if obs.process_alive:  # after the exit the window freezes: no new points
            self._history = extend(self._history, frame)
        frame = replace(frame, history=self._history)
        if not obs.process_alive and not obs.stacks:
            raise AttachError(f"process {self._pid} exited", ExitCode.NO_PROCESS)
        return frame

    def set_rate(self, rate_hz: float | None) -> float | None:
        return self._sampler.set_rate(rate_hz)  # clamped by the sampler; None: auto

    def set_native(self, native: bool) -> bool:
        with self._lock:
            self._native = native
        self._sampler.set_native(native)
        return native

    def write_snapshot(self) -> str:
        """A bug-report bundle in the current directory (``dflash-diag snapshot``'s default name)."""
        try:
            from dflash_diag.snapshot import take_snapshot
        except ImportError:
            raise CommandError("snapshots are not available in this build", ExitCode.FAILURE) from None
        return str(take_snapshot(self._pid).path.resolve())

    def close(self) -> None:
        self._sampler.close()
