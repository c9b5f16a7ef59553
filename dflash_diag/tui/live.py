"""The real :class:`TopSource`: the live sampler (py-spy, /proc, NVML, board) plus the analyses, as frames.

Nothing here draws; the app gets :class:`TopFrame` values only. Batch mode uses :func:`collect_frame`, which runs
the same analyses over one fixed window, so the screen and ``--batch`` agree.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace

from dflash_diag.errors import AttachError, CommandError, ExitCode
from dflash_diag.model import NA, Finding, Maybe, Observation
from dflash_diag.sources import collect
from dflash_diag.sources.outside import OutsideReader
from dflash_diag.tui.frame import TopFrame, build_frame


def analyse_frame(
    obs: Observation, target_pattern: str | None, drafter_pattern: str | None, *, wall_s: float, rate_hz: float,
    native: bool,
) -> TopFrame:
    """Observation -> frame, through the one analysis ``doctor`` and ``snapshot`` use. An analysis that fails
    becomes an N/A pane with the reason, never a dead screen."""
    from dflash_diag.analysis import analyse

    analysis = analyse(obs, target_pattern=target_pattern, drafter_pattern=drafter_pattern, now_wall_s=wall_s)
    findings: Maybe[tuple[Finding, ...]] = (
        analysis.findings if not isinstance(analysis.pipeline, NA) else NA("no pipeline view to judge"))
    frame = build_frame(obs, analysis.threads, analysis.pipeline, findings, wall_s=wall_s, rate_hz=rate_hz,
                        native=native, extra_warnings=analysis.errors)
    return replace(frame, headline=analysis.headline)


def collect_frame(
    pid: int,
    duration_s: float,
    *,
    rate_hz: float,
    native: bool,
    window_s: float,
    target_pattern: str | None,
    drafter_pattern: str | None,
    board_dir: str | None,
) -> TopFrame:
    """Batch mode: sample for ``duration_s`` and analyse the whole run as one window."""
    collector = collect.Collector(pid, rate_hz=rate_hz, native=native, board_dir=board_dir)
    obs = OutsideReader(pid).enrich(collector.collect(duration_s))
    return analyse_frame(obs, target_pattern, drafter_pattern, wall_s=time.time(), rate_hz=rate_hz, native=native)


class LiveSource:
    """Wraps the rolling-window live sampler; ``poll`` runs on the app's sampler thread."""

    def __init__(
        self,
        pid: int,
        *,
        rate_hz: float,
        native: bool,
        window_s: float,
        target_pattern: str | None,
        drafter_pattern: str | None,
        board_dir: str | None,
    ) -> None:
        self._pid = pid
        self._patterns = (target_pattern, drafter_pattern)
        self._outside = OutsideReader(pid)
        self._board_dir = board_dir
        self._lock = threading.Lock()  # rate/native change from the UI thread while poll runs on the sampler
        self._rate_hz = rate_hz
        self._native = native
        self._sampler = collect.LiveSampler(
            pid, rate_hz=rate_hz, native=native, window_s=window_s, board_dir=board_dir
        )

    @property
    def pid(self) -> int:
        return self._pid

    @property
    def rate_hz(self) -> float:
        return self._rate_hz

    def poll(self) -> TopFrame:
        obs = self._outside.enrich(self._sampler.poll())
        with self._lock:
            rate_hz, native = self._rate_hz, self._native
        frame = analyse_frame(obs, *self._patterns, wall_s=time.time(), rate_hz=rate_hz, native=native)
        frame = replace(frame, rate_hz=self._sampler.effective_rate_hz, requested_rate_hz=rate_hz)
        if not obs.process_alive and not obs.stacks:
            raise AttachError(f"process {self._pid} exited", ExitCode.NO_PROCESS)
        return frame

    def set_rate(self, rate_hz: float) -> float:
        rate_hz = self._sampler.set_rate(rate_hz)  # clamped by the sampler
        with self._lock:
            self._rate_hz = rate_hz
        return rate_hz

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
        close = getattr(self._sampler, "close", None)
        if close is not None:
            close()
