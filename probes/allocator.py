"""allocator: CUDA caching-allocator churn per device, from ``torch.cuda.memory_stats`` deltas.

In steady-state training ``num_device_alloc``/``num_device_free`` (cudaMalloc/cudaFree) should not move:
each one synchronises the device. Retries (cudaMalloc failed, cache flushed, retried) are large stalls.
Fragmentation: the bytes of blocks split and left inactive (``inactive_split_bytes``) as a share of what is reserved,
and how many such blocks; the allocation throughput (bytes handed out per second) and what the program asked for
(``requested_bytes``, before the allocator's rounding).
The stats are read at publish time only (taken under the allocator mutex, ~tens of us per device), and
only once the program itself initialised CUDA: the probe never creates a CUDA context.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from dflash_contract.board import AllocatorKeys, PayloadKeys, ProbeName
from probes._common import JsonDict, na, torch_if_imported
from probes._vocab import VocabWatch

StatsFn = Callable[[int], Mapping[str, Any]]
# A device's memory and what this process may use of it (its per-process memory fraction), in bytes; None: unknown.
LimitsFn = Callable[[int], tuple[int | None, int | None]]


@dataclass(frozen=True, kw_only=True)
class Config:
    window_points: int = 120  # snapshots kept for the reserved/allocated swings
    vocab_window_s: float = 0.5  # a discovery window of vocabulary projections (probes/_vocab.py) this long ...
    vocab_every_s: float = 120.0  # ... this often; 0 turns it off


class _Device:
    def __init__(self, window_points: int) -> None:
        self.prev: Mapping[str, Any] | None = None
        self.prev_s = 0.0
        self.reserved: deque[int] = deque(maxlen=window_points)
        self.allocated: deque[int] = deque(maxlen=window_points)


def _int(stats: Mapping[str, Any], key: str) -> int:
    value = stats.get(key, 0)
    return int(value) if isinstance(value, (int, float)) else 0


class AllocatorProbe:
    name = "allocator"

    def __init__(
        self,
        config: Config,
        stats_fn: StatsFn | None = None,
        devices: list[int] | None = None,
        clock: Callable[[], float] = time.monotonic,
        limits_fn: LimitsFn | None = None,
    ) -> None:
        self.config = config
        self._stats_fn = stats_fn
        self._limits_fn = limits_fn
        self._devices_override = devices
        self._clock = clock
        self._state: dict[int, _Device] = {}
        self.empty_cache_calls = 0
        self._patched: tuple[Any, Any] | None = None
        self._vocab = VocabWatch(window_s=config.vocab_window_s, every_s=config.vocab_every_s)

    def _source(self) -> tuple[StatsFn, list[int]] | str:
        """The stats function and devices to read, or the reason there are none."""
        if self._stats_fn is not None:
            return self._stats_fn, self._devices_override or [0]
        torch = torch_if_imported()
        if torch is None:
            return "no CUDA: torch not imported"
        cuda = torch.cuda
        if not cuda.is_available():
            return "no CUDA"
        if not cuda.is_initialized():
            return "CUDA not initialised by the program yet"
        self._patch_empty_cache(cuda)
        if self.config.vocab_every_s > 0:
            self._vocab.tick(torch)
        return cuda.memory_stats, self._devices_override or list(range(cuda.device_count()))

    def _limits(self, dev: int) -> tuple[int | None, int | None]:
        """The device's memory and this process's share of it (gpu-memory-growth projects growth onto it)."""
        if self._limits_fn is not None:
            return self._limits_fn(dev)
        torch = torch_if_imported()
        if torch is None:
            return None, None
        try:
            total = int(torch.cuda.get_device_properties(dev).total_memory)
            fraction = getattr(torch.cuda, "get_per_process_memory_fraction", None)  # torch >= 2.x has it
            share = float(fraction(dev)) if fraction is not None else 1.0
            return total, int(total * min(1.0, max(0.0, share)))
        except Exception:  # a reading, never a failure of the probe
            return None, None

    def _patch_empty_cache(self, cuda: Any) -> None:
        # empty_cache() is a common hidden cause of cudaMalloc churn; count calls made through torch.cuda.
        if self._patched is not None:
            return
        original = cuda.empty_cache

        def empty_cache() -> None:
            self.empty_cache_calls += 1
            original()

        cuda.empty_cache = empty_cache
        self._patched = (cuda, original)

    def snapshot(self, now_s: float) -> JsonDict:
        source = self._source()
        if isinstance(source, str):
            return na(source)
        stats_fn, devices = source
        now = self._clock()
        out: JsonDict = {}
        for dev in devices:
            stats = stats_fn(dev)
            if not stats:
                continue
            out[str(dev)] = self._device(dev, stats, now)
            total, limit = self._limits(dev)
            out[str(dev)][AllocatorKeys.TOTAL_BYTES] = total
            out[str(dev)][AllocatorKeys.LIMIT_BYTES] = limit
        if not out:
            return na("memory_stats() is empty (cudaMallocAsync backend or no allocations yet)")
        return {PayloadKeys.STATUS: "ok", AllocatorKeys.DEVICES: out, AllocatorKeys.EMPTY_CACHE_CALLS: self.empty_cache_calls,
                AllocatorKeys.VOCAB_PROJECTIONS: self._vocab.rows()}

    def _device(self, dev: int, stats: Mapping[str, Any], now: float) -> JsonDict:
        state = self._state.setdefault(dev, _Device(self.config.window_points))
        prev, dt = state.prev, now - state.prev_s

        def rate(key: str) -> float:
            if prev is None or dt <= 0:
                return 0.0
            return max(0.0, (_int(stats, key) - _int(prev, key)) / dt)

        reserved = _int(stats, "reserved_bytes.all.current")
        allocated = _int(stats, "allocated_bytes.all.current")
        state.reserved.append(reserved)
        state.allocated.append(allocated)
        inactive = _int(stats, "inactive_split_bytes.all.current")
        payload = {
            AllocatorKeys.DEVICE_ALLOC_PER_S: rate("num_device_alloc"),
            AllocatorKeys.DEVICE_FREE_PER_S: rate("num_device_free"),
            AllocatorKeys.ALLOC_RETRIES: _int(stats, "num_alloc_retries"),
            AllocatorKeys.ALLOC_RETRIES_PER_S: rate("num_alloc_retries"),
            AllocatorKeys.OOMS: _int(stats, "num_ooms"),
            AllocatorKeys.OOM_REJECTIONS: _int(stats, "num_oom_rejections"),
            AllocatorKeys.SYNC_ALL_STREAMS_PER_S: rate("num_sync_all_streams"),
            AllocatorKeys.ALLOCATIONS_PER_S: rate("allocation.all.allocated"),
            # Bytes handed out per second (cumulative allocated bytes): a tensor made and dropped every step (a
            # full-vocabulary logits tensor no one reads) shows here, however briefly it lives.
            AllocatorKeys.ALLOCATED_BYTES_PER_S: rate("allocated_bytes.all.allocated"),
            AllocatorKeys.REQUESTED_BYTES: _int(stats, "requested_bytes.all.current"),
            AllocatorKeys.INACTIVE_SPLITS: _int(stats, "inactive_split.all.current"),
            AllocatorKeys.ALLOCATED_BYTES: allocated,
            AllocatorKeys.RESERVED_BYTES: reserved,
            AllocatorKeys.RESERVED_PEAK_BYTES: _int(stats, "reserved_bytes.all.peak"),
            AllocatorKeys.ALLOCATED_PEAK_BYTES: _int(stats, "allocated_bytes.all.peak"),
            AllocatorKeys.RESERVED_SWING_BYTES: max(state.reserved) - min(state.reserved),
            AllocatorKeys.ALLOCATED_SWING_BYTES: max(state.allocated) - min(state.allocated),
            AllocatorKeys.INACTIVE_SPLIT_BYTES: inactive,
            AllocatorKeys.FRAGMENTATION_SHARE: inactive / reserved if reserved else 0.0,
            AllocatorKeys.EMPTY_CACHE_CALLS: self.empty_cache_calls,
            AllocatorKeys.NUM_DEVICE_ALLOC: _int(stats, "num_device_alloc"),
            AllocatorKeys.NUM_DEVICE_FREE: _int(stats, "num_device_free"),
            AllocatorKeys.NUM_SYNC_ALL_STREAMS: _int(stats, "num_sync_all_streams"),
            AllocatorKeys.WINDOW_S: dt if prev is not None else 0.0,
        }
        state.prev, state.prev_s = dict(stats), now
        return payload

    def close(self) -> None:
        self._vocab.close()
        if self._patched is not None:
            cuda, original = self._patched
            cuda.empty_cache = original
            self._patched = None


# What the probe registry (``probes/registry.py``) reads of this module: its board name, its Config, its class.
NAME = ProbeName.ALLOCATOR
PROBE = AllocatorProbe
