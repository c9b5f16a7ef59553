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


# NVML GPM metrics read (Hopper and newer): the SM pipes' use over a window, not "some kernel ran" (util_pct).
GPM_FIELDS: tuple[str, ...] = ("sm_util_pct", "sm_occupancy_pct", "any_tensor_pct", "hmma_tensor_pct", "fp32_pct",
                               "fp16_pct", "dram_bw_pct")


@dataclass(frozen=True, slots=True)
class GpmReading:
    """NVML GPM over one window of one GPU: the share of time the SMs were busy, warps resident vs the maximum,
    tensor-core (any, and HMMA: fp16/bf16/tf32) vs non-tensor FP32/FP16 pipe use, DRAM bandwidth, each 0-100."""

    index: int
    window_s: float
    sm_util_pct: Maybe[float]
    sm_occupancy_pct: Maybe[float]
    any_tensor_pct: Maybe[float]
    hmma_tensor_pct: Maybe[float]
    fp32_pct: Maybe[float]
    fp16_pct: Maybe[float]
    dram_bw_pct: Maybe[float]
