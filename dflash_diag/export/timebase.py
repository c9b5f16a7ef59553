"""One clock for a trace: every reading of an Observation placed on the sampler's monotonic clock, in µs.

Stacks, /proc and NVML readings carry the sampler's ``time.monotonic()``; boards and the probes' events
carry the trainer's wall clock. Stack samples hold both clocks at one instant, which gives the offset.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from dflash_diag.model import Observation


@dataclass(frozen=True, slots=True)
class Timebase:
    origin_mono_s: float  # time zero of the trace
    wall_minus_mono_s: float  # wall clock - monotonic clock of the sampling process
    end_mono_s: float

    def us(self, mono_s: float) -> int:
        """Whole microseconds since the origin: integers, so nested slices share exact boundaries."""
        return round((mono_s - self.origin_mono_s) * 1e6)

    def wall_us(self, wall_s: float) -> int:
        return self.us(wall_s - self.wall_minus_mono_s)

    @property
    def end_us(self) -> int:
        return self.us(self.end_mono_s)


def timebase(obs: Observation) -> Timebase:
    times = [s.monotonic_s for s in obs.stacks]
    times += [sweep[0].monotonic_s for sweep in obs.proc if sweep]
    if isinstance(obs.gpus, tuple):
        times += [sweep[0].monotonic_s for sweep in obs.gpus if sweep]
    if obs.stacks:
        offset = statistics.median(s.wall_s - s.monotonic_s for s in obs.stacks)
    else:
        offset = obs.started_wall_s - (min(times) if times else 0.0)
    origin = min(times) if times else obs.started_wall_s - offset
    end = max(times + [origin + obs.window_s])
    return Timebase(origin_mono_s=origin, wall_minus_mono_s=offset, end_mono_s=end)


def sample_ends(obs: Observation) -> dict[float, float]:
    """Each stack sample's time -> when the next one was taken (the last lasts one typical interval)."""
    times = sorted({s.monotonic_s for s in obs.stacks})
    if not times:
        return {}
    gaps = [b - a for a, b in zip(times, times[1:], strict=False) if b > a]
    typical = statistics.median(gaps) if gaps else 0.2
    ends = {a: b for a, b in zip(times, times[1:], strict=False)}
    ends[times[-1]] = times[-1] + typical
    return ends
