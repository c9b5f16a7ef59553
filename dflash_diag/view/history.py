"""``top``'s history: tok/s, the queue's depth and each GPU's utilisation over the last minutes. Pure.

The live source folds each new frame into a :class:`History` (:func:`extend`, an immutable value carried by
the frame), so widgets draw it without state of their own. :func:`buckets` puts the points on a linear time
axis, one bucket per column of the chart: a drop in tok/s shows as a drop at the moment it happened, and a
stretch without readings shows as a gap, not as a squeezed line.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from dflash_diag.model import GpuSample, Maybe, PipelineView


class Readings(Protocol):
    """What the history reads of a frame (``view.frame.TopFrame``, which holds a history: it names no frame type)."""

    @property
    def wall_s(self) -> float: ...

    @property
    def pipeline(self) -> Maybe[PipelineView]: ...

    @property
    def gpus(self) -> Maybe[tuple[GpuSample, ...]]: ...

DEFAULT_HORIZON_S = 300.0  # five minutes
MAX_POINTS = 600  # per series: a frame a second for the horizon, with room to spare

TOKENS = "tok/s"


@dataclass(frozen=True, slots=True)
class Series:
    name: str  # "tok/s", "q_hs depth", "GPU 0 util %"
    points: tuple[tuple[float, float], ...]  # (wall_s, value), oldest first

    @property
    def last(self) -> float | None:
        return self.points[-1][1] if self.points else None

    def low_high(self) -> tuple[float, float] | None:
        values = [v for _, v in self.points]
        return (min(values), max(values)) if values else None


@dataclass(frozen=True, slots=True)
class History:
    horizon_s: float = DEFAULT_HORIZON_S
    series: tuple[Series, ...] = ()
    end_wall_s: float | None = None  # the newest frame folded in

    def get(self, name: str) -> Series | None:
        return next((s for s in self.series if s.name == name), None)


EMPTY_HISTORY = History()


def queue_series_name(pipeline: PipelineView) -> str:
    return f"{pipeline.queue_name} depth"


def gpu_series_name(gpu: GpuSample) -> str:
    return f"GPU {gpu.index} util %"


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def readings(frame: Readings) -> dict[str, float]:
    """The frame's values of each history series (absent ones are left out: a gap, never a made-up 0)."""
    out: dict[str, float] = {}
    pipeline = frame.pipeline
    if isinstance(pipeline, PipelineView):
        tokens = _number(pipeline.drafter.tokens_per_s)
        if tokens is None:
            tokens = _number(pipeline.target.tokens_per_s)
        if tokens is not None:
            out[TOKENS] = tokens
        depth = _number(pipeline.queue_depth)
        if depth is not None:
            out[queue_series_name(pipeline)] = depth
    if isinstance(frame.gpus, tuple):
        for gpu in frame.gpus:
            util = _number(gpu.util_pct)
            if util is not None:
                out[gpu_series_name(gpu)] = util
    return out


def extend(history: History, frame: Readings) -> History:
    """``history`` with ``frame``'s readings added at ``frame.wall_s`` and points past the horizon dropped."""
    now = frame.wall_s
    if history.end_wall_s is not None and now <= history.end_wall_s:
        return history  # the same (or an older) frame again: nothing new
    values = readings(frame)
    since = now - history.horizon_s
    by_name: dict[str, list[tuple[float, float]]] = {s.name: [p for p in s.points if p[0] >= since]
                                                     for s in history.series}
    for name, value in values.items():
        by_name.setdefault(name, []).append((now, value))
    series = tuple(Series(name, tuple(points[-MAX_POINTS:])) for name, points in _ordered(by_name) if points)
    return History(horizon_s=history.horizon_s, series=series, end_wall_s=now)


def _ordered(by_name: Mapping[str, list[tuple[float, float]]]) -> Iterable[tuple[str, list[tuple[float, float]]]]:
    """tok/s first, then queues, then GPUs by index."""
    def key(name: str) -> tuple[int, int, str]:
        if name == TOKENS:
            return (0, 0, name)
        if name.startswith("GPU "):
            index = name.split()[1]
            return (2, int(index) if index.isdigit() else 0, name)
        return (1, 0, name)

    return sorted(by_name.items(), key=lambda kv: key(kv[0]))


def buckets(series: Series, end_wall_s: float, span_s: float, width: int) -> list[float | None]:
    """``width`` values on a linear time axis ending at ``end_wall_s``: each the mean of the points that fall in
    its bucket, None where there were none."""
    if width <= 0 or span_s <= 0:
        return []
    start = end_wall_s - span_s
    sums = [0.0] * width
    counts = [0] * width
    for t, v in series.points:
        if t < start or t > end_wall_s:
            continue
        i = min(width - 1, int((t - start) / span_s * width))
        sums[i] += v
        counts[i] += 1
    return [s / c if c else None for s, c in zip(sums, counts, strict=True)]
