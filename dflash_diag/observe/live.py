"""A target watched continuously (``top``): live samplers on daemon threads, and ``poll()`` the last
``history_s`` seconds as one observation, of a process or of every rank of a job, judged at the poll's time.

A job's live view shares the live budget between its ranks: ``RANK_LIVE_HZ`` stacks a second for the whole job
(the single-process view's 2-10 Hz), at least ``MIN_RANK_LIVE_HZ`` per rank, unless a rate is asked for.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from dflash_diag.errors import AttachError, ExitCode
from dflash_diag.model import NA, Observation
from dflash_diag.model.job import JobObservation, RankIdentity
from dflash_diag.observe.target import Target
from dflash_diag.observe.window import Window
from dflash_diag.sources.collect import LiveSampler
from dflash_diag.sources.config import SamplerConfig
from dflash_diag.sources.outside import OutsideReader

RANK_LIVE_HZ = 4.0
MIN_RANK_LIVE_HZ = 0.5


def live_rank_config(config: SamplerConfig, n_ranks: int) -> SamplerConfig:
    """A share of the live budget per rank when no rate was asked for."""
    if config.rate_hz is not None or n_ranks <= 1:
        return config
    return replace(config, rate_hz=max(MIN_RANK_LIVE_HZ, RANK_LIVE_HZ / n_ranks), adaptive=True)


class LiveObserver:
    """Live samplers over a target; ``poll`` (one thread) returns the newest window as one observation."""

    def __init__(self, target: Target, window: Window, history_s: float, *,
                 wall_clock: Callable[[], float] = time.time) -> None:
        self.target = target
        ranks = target.job.ranks if target.job is not None else ()
        config = live_rank_config(window.live_config(target.board_dir, history_s), max(1, len(ranks)))
        self.config = config
        self._samplers = [LiveSampler(pid, config) for pid in target.pids]
        self._outside = [OutsideReader(pid) for pid in target.pids]  # state, stderr, source files: cached
        self._ranks = ranks
        self._wall = wall_clock

    @property
    def rate_hz(self) -> float | None:
        """The rate asked for (None: auto)."""
        return self._samplers[0].rate_hz

    def effective_rate_hz(self, index: int = 0) -> float:
        return self._samplers[index].effective_rate_hz

    def poll(self) -> Observation | JobObservation:
        """The newest window; AttachError(NO_PROCESS) once nothing of the target is left to show."""
        now = self._wall()
        if self.target.job is None:
            obs = self._outside[0].enrich(self._samplers[0].poll())
            if not obs.process_alive and not obs.stacks:
                raise AttachError(f"process {self.target.pid} exited", ExitCode.NO_PROCESS)
            return replace(obs, patterns=self.target.patterns, now_wall_s=now)
        observations = tuple(self._rank(rank, sampler, outside, now)
                             for rank, sampler, outside in zip(self._ranks, self._samplers, self._outside, strict=True))
        if not any(o.process_alive or o.stacks for o in observations):
            raise AttachError(f"every rank of {self.target.label} exited", ExitCode.NO_PROCESS)
        topology = self.target.job
        return JobObservation(topology=topology, ranks=observations, started_wall_s=now,
                              window_s=max((o.window_s for o in observations), default=0.0), launcher_alive=None,
                              warnings=topology.notes, now_wall_s=now)

    def _rank(self, rank: RankIdentity, sampler: LiveSampler, outside: OutsideReader, now: float) -> Observation:
        try:
            obs = outside.enrich(sampler.poll())
        except AttachError as exc:
            obs = Observation(pid=rank.pid, cmdline=(), started_wall_s=now, window_s=0.0, stacks=(), proc=(),
                              gpus=NA("not sampled"), boards=NA("not sampled"), process_alive=False,
                              warnings=(f"{rank.label}: {exc}",))
        return replace(obs, patterns=self.target.patterns, now_wall_s=now)

    def set_rate(self, rate_hz: float | None) -> float | None:
        out = None
        for sampler in self._samplers:
            out = sampler.set_rate(rate_hz)  # clamped by the sampler; None: auto
        return out

    def set_native(self, native: bool) -> bool:
        for sampler in self._samplers:
            sampler.set_native(native)
        return native

    def close(self) -> None:
        for sampler in self._samplers:
            sampler.close()


__all__ = ["LiveObserver", "MIN_RANK_LIVE_HZ", "RANK_LIVE_HZ", "live_rank_config"]
