"""Sample every rank of a job over one window: one :class:`~dflash_diag.sources.collect.Collector` per rank, all
started together on their own threads, so the ranks' stacks, /proc readings and boards cover the same seconds.

The cost is bounded for the job, not per process: a one-off burst gives the job ``BURST_RATE_HZ`` stack dumps a
second in all, shared between the ranks (at least ``MIN_RANK_RATE_HZ`` each): four ranks get 5 a second each, so
py-spy's CPU stays what doctor spends on one process. Each rank's Python children (its data-loader workers) are
dumped as for one process (one each second, in turn). NVML is read by one source shared by all ranks.

A rank that cannot be sampled (it exited before the window, py-spy refused it) is an observation with no stacks
and a warning that says why: the other ranks are still sampled, and the analysis names the one that is missing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import replace

from dflash_diag.errors import AttachError
from dflash_diag.model import NA, Observation
from dflash_diag.model.evidence import ProcessFacts
from dflash_diag.model.job import JobObservation, JobTopology, RankIdentity
from dflash_diag.sources import procfs
from dflash_diag.sources.config import BURST_RATE_HZ, SamplerConfig, SamplerIO
from dflash_diag.sources.pyspy_find import find_pyspy

MIN_RANK_RATE_HZ = 4.0  # fewer stacks a second per rank leave a 5 s window too few samples to judge shares
Progress = Callable[[float, float], None]
CollectorFactory = Callable[[int, SamplerConfig, SamplerIO], "RankCollector"]
Enricher = Callable[[int, Observation], Observation]  # the outside evidence of one rank (stderr, source files)


class RankCollector:
    """What the job collector needs of a per-process collector (``sources.collect.Collector``)."""

    def collect(self, duration_s: float, progress: Progress | None = None) -> Observation:  # pragma: no cover
        raise NotImplementedError


def rank_config(config: SamplerConfig, n_ranks: int) -> SamplerConfig:
    """The per-rank sampling of a job: the job's stack rate shared between its ranks (a burst's 20 a second in
    all, at least ``MIN_RANK_RATE_HZ`` each); a rate asked for is per rank, as for one process."""
    if not config.burst or n_ranks <= 1:
        return config
    share = max(MIN_RANK_RATE_HZ, (config.rate_hz or BURST_RATE_HZ) / n_ranks)
    return replace(config, rate_hz=share)


def _real_collector(pid: int, config: SamplerConfig, io: SamplerIO) -> RankCollector:
    from dflash_diag.sources.collect import Collector

    return Collector(pid, config, io)  # type: ignore[return-value]  # it has collect() with this signature


def _shared_nvml() -> SamplerIO:
    from dflash_diag.sources.collect import _default_nvml

    nvml = _default_nvml()
    return SamplerIO(nvml=nvml) if nvml is not None else SamplerIO()


class JobCollector:
    """Sample every rank of ``topology`` for one window (``doctor``, ``snapshot``, ``top --batch``, ``record``)."""

    def __init__(self, topology: JobTopology, config: SamplerConfig, *, io: SamplerIO | None = None,
                 factory: CollectorFactory | None = None, enrich: Enricher | None = None,
                 launcher_facts: Callable[[int], ProcessFacts | None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.topology = topology
        self.config = rank_config(config, len(topology.ranks))
        self._io = io if io is not None else _shared_nvml()
        self._factory = factory or _real_collector
        self._enrich = enrich
        self._launcher_facts = launcher_facts or _launcher_facts
        self._clock = clock

    @property
    def rank_rate_hz(self) -> float | None:
        return self.config.rate_hz

    def collect(self, duration_s: float, progress: Progress | None = None) -> JobObservation:
        """Every rank over one window of ``duration_s``; never raises for one rank's failure (see the module)."""
        ranks = self.topology.ranks
        # Before the threads: finding py-spy may read sysconfig, whose first use is not thread-safe (two threads
        # at once saw a half-built config: AttributeError 'userbase').
        find_pyspy()
        started_wall, start = time.time(), self._clock()
        with ThreadPoolExecutor(max_workers=max(1, len(ranks)), thread_name_prefix="dflash-diag-rank") as pool:
            futures = [pool.submit(self._one, rank, duration_s) for rank in ranks]
            while progress is not None and wait(futures, timeout=0.2).not_done:
                progress(min(self._clock() - start, duration_s), duration_s)
            observations = tuple(f.result() for f in futures)
        launcher = self.topology.launcher_pid
        alive = procfs.process_alive(launcher) if launcher is not None else None
        facts = self._launcher_facts(launcher) if launcher is not None else None
        warnings = tuple(self.topology.notes)
        return JobObservation(topology=self.topology, ranks=observations, started_wall_s=started_wall,
                              window_s=max((o.window_s for o in observations), default=0.0),
                              launcher_alive=alive, launcher=facts, warnings=warnings)

    def _one(self, rank: RankIdentity, duration_s: float) -> Observation:
        try:
            collector = self._factory(rank.pid, self.config, self._io)
            obs = collector.collect(duration_s)
        except AttachError as exc:
            return _unsampled(rank, str(exc))
        if self._enrich is not None:
            try:
                obs = self._enrich(rank.pid, obs)
            except AttachError:
                pass  # it exited after the window: what was sampled stands
        return obs


def _unsampled(rank: RankIdentity, why: str) -> Observation:
    alive = procfs.process_alive(rank.pid, rank.start_ticks)
    return Observation(pid=rank.pid, cmdline=(), started_wall_s=time.time(), window_s=0.0, stacks=(), proc=(),
                       gpus=NA("not sampled"), boards=NA("not sampled"), process_alive=alive,
                       warnings=(f"{rank.label} (PID {rank.pid}) could not be sampled: {why}",))


def _launcher_facts(pid: int) -> ProcessFacts | None:
    """The launcher's run state and stderr tail (torchrun reports each failed rank there)."""
    from dflash_diag.sources.outside import OutsideReader

    try:
        return OutsideReader(pid).process_facts()
    except (AttachError, OSError):
        return None


__all__ = ["JobCollector", "MIN_RANK_RATE_HZ", "rank_config"]
