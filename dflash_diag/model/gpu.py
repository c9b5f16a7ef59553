"""One NVML reading of one GPU. Every field may be NA with the reason the driver gave."""

from __future__ import annotations

from dataclasses import dataclass

from dflash_diag.model.common import Maybe


@dataclass(frozen=True, slots=True)
class GpuProcess:
    pid: int
    used_memory_bytes: Maybe[int]
    sm_util_pct: Maybe[float]  # nvmlDeviceGetProcessUtilization; NA where the driver does not report it


@dataclass(frozen=True, slots=True)
class GpuSample:
    index: int
    name: str
    uuid: str
    util_pct: Maybe[float]
    mem_util_pct: Maybe[float]
    memory_used_bytes: Maybe[int]
    memory_total_bytes: Maybe[int]
    power_w: Maybe[float]
    power_limit_w: Maybe[float]
    sm_clock_mhz: Maybe[int]
    max_sm_clock_mhz: Maybe[int]
    temperature_c: Maybe[int]
    throttle_reasons: Maybe[tuple[str, ...]]  # human names of active clock-event reasons, () when none
    processes: Maybe[tuple[GpuProcess, ...]]
    monotonic_s: float
