"""GPU readings through NVML (nvidia-ml-py's ``pynvml``). Every reading may be NA with the driver's reason.

Every NVML call goes through :meth:`NvmlSource._call`, the one choke point that turns ``NVMLError`` (not
supported, no permission, GPU lost...) into an :class:`NA` value, so one unsupported query never hides the
others and never raises into the sampler. The module is injectable: tests pass a fake ``pynvml``.

GPM (GPU Performance Monitoring, Hopper and newer, no DCGM needed): :meth:`NvmlSource.gpm_begin` takes a first
sample of every GPU that supports it, :meth:`NvmlSource.gpm_end` a second one and the metrics between the two: SM
use and occupancy, tensor-core vs FP32/FP16 pipe use, DRAM bandwidth. The window must last at least
``MIN_GPM_WINDOW_S``: a 60 ms window read all zeros on the H200, 0.7 s and more read right.
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from dflash_diag.model import NA, GpmReading, GpuProcess, GpuSample, Maybe

# Clock-event ("throttle") reason bits, stable across NVML versions (nvml.h nvmlClocksEventReason*).
THROTTLE_REASONS: tuple[tuple[int, str], ...] = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
    (0x200, "board_limit"),
    (0x400, "reliability"),
)

_NVML_CLOCK_SM = 1
_NVML_TEMPERATURE_GPU = 0
_ERROR_NAMES = {
    1: "NVML not initialised",
    2: "invalid argument",
    3: "not supported on this GPU/driver",
    4: "no permission (run as root or grant access to the GPU)",
    6: "not found",
    9: "driver not loaded",
    12: "no NVML (libnvidia-ml.so not found)",
    13: "function not found in this driver's NVML",
    15: "GPU is lost (fell off the bus)",
    999: "unknown NVML error",
}
_NOT_FOUND = 6
# NVML GPM metric ids (nvml.h nvmlGpmMetricId_t, stable): the fields of GpmReading.
GPM_METRIC_IDS: tuple[tuple[str, int], ...] = (
    ("sm_util_pct", 2), ("sm_occupancy_pct", 3), ("any_tensor_pct", 5), ("hmma_tensor_pct", 7),
    ("dram_bw_pct", 10), ("fp32_pct", 12), ("fp16_pct", 13),
)
MIN_GPM_WINDOW_S = 0.7  # measured on the H200: 60 ms read zeros, 0.7 s and more read the load


def throttle_names(mask: int) -> tuple[str, ...]:
    """Human names of the active clock-event reasons in ``mask`` (unknown bits as hex)."""
    names = [name for bit, name in THROTTLE_REASONS if mask & bit]
    known = 0
    for bit, _ in THROTTLE_REASONS:
        known |= bit
    if mask & ~known:
        names.append(f"other(0x{mask & ~known:x})")
    return tuple(names)


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


class NvmlSource:
    """Samples every GPU NVML sees. ``sample()`` is NA (with the reason) when NVML itself is unusable."""

    def __init__(
        self,
        nvml_module: ModuleType | Any | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        process_util_window_s: float = 5.0,
    ) -> None:
        self._module = nvml_module
        self._clock = clock
        self._wall = wall_clock
        self._window_s = process_util_window_s
        self._init: Maybe[bool] | None = None  # None: not tried yet
        self._lock = threading.Lock()

    # --- the choke point -------------------------------------------------------------------------------

    def _error_type(self) -> type[BaseException]:
        err = getattr(self._module, "NVMLError", None)
        return err if isinstance(err, type) and issubclass(err, BaseException) else Exception

    def _reason(self, name: str, exc: BaseException) -> str:
        code = getattr(exc, "value", None)
        if isinstance(code, int) and code in _ERROR_NAMES:
            return f"{name}: {_ERROR_NAMES[code]}"
        return f"{name}: {exc}"

    def _call(self, name: str, *args: Any) -> Any:
        """Call ``pynvml.<name>(*args)``; any NVML failure becomes NA(reason)."""
        fn = getattr(self._module, name, None)
        if fn is None:
            return NA(f"{name} is not in this nvidia-ml-py")
        try:
            return fn(*args)
        except self._error_type() as exc:
            return NA(self._reason(name, exc))
        except Exception as exc:  # a broken binding must not take the sampler down
            return NA(f"{name} failed: {type(exc).__name__}: {exc}")

    def _ensure(self) -> Maybe[bool]:
        if self._init is not None:
            return self._init
        if self._module is None:
            try:
                self._module = importlib.import_module("pynvml")
            except ImportError:
                self._init = NA("no NVML: nvidia-ml-py is not installed (pip install nvidia-ml-py)")
                return self._init
        result = self._call("nvmlInit")
        if isinstance(result, NA):
            reason = result.reason.removeprefix("nvmlInit: ")
            self._init = NA(reason if reason.startswith("no NVML") else f"no NVML: {reason}")
        else:
            self._init = True
        return self._init

    # --- readings --------------------------------------------------------------------------------------

    def sample(self) -> Maybe[tuple[GpuSample, ...]]:
        """One reading of every GPU, or NA when NVML is missing/broken (this CPU box: no libnvidia-ml.so)."""
        with self._lock:
            ready = self._ensure()
            if isinstance(ready, NA):
                return ready
            count = self._call("nvmlDeviceGetCount")
            if isinstance(count, NA):
                return count
            if not isinstance(count, int) or count < 0:
                return NA(f"nvmlDeviceGetCount returned {count!r}")
            if count == 0:
                return NA("NVML sees no GPU")
            return tuple(self._device(i) for i in range(count))

    def _device(self, index: int) -> GpuSample:
        now = self._clock()
        handle = self._call("nvmlDeviceGetHandleByIndex", index)
        if isinstance(handle, NA):
            return _empty(index, handle, now)
        name = self._call("nvmlDeviceGetName", handle)
        uuid = self._call("nvmlDeviceGetUUID", handle)
        util = self._call("nvmlDeviceGetUtilizationRates", handle)
        mem = self._call("nvmlDeviceGetMemoryInfo", handle)
        power_mw = self._call("nvmlDeviceGetPowerUsage", handle)
        limit_mw = self._call("nvmlDeviceGetEnforcedPowerLimit", handle)
        clock_sm = getattr(self._module, "NVML_CLOCK_SM", _NVML_CLOCK_SM)
        sm = self._call("nvmlDeviceGetClockInfo", handle, clock_sm)
        max_sm = self._call("nvmlDeviceGetMaxClockInfo", handle, clock_sm)
        temp = self._call(
            "nvmlDeviceGetTemperature", handle, getattr(self._module, "NVML_TEMPERATURE_GPU", _NVML_TEMPERATURE_GPU)
        )
        return GpuSample(
            index=index,
            name=_text(name) if not isinstance(name, NA) else "?",
            uuid=_text(uuid) if not isinstance(uuid, NA) else "?",
            util_pct=_attr_num(util, "gpu"),
            mem_util_pct=_attr_num(util, "memory"),
            memory_used_bytes=_attr_int(mem, "used"),
            memory_total_bytes=_attr_int(mem, "total"),
            power_w=power_mw / 1000.0 if _is_num(power_mw) else _na(power_mw),
            power_limit_w=limit_mw / 1000.0 if _is_num(limit_mw) else _na(limit_mw),
            sm_clock_mhz=int(sm) if _is_num(sm) else _na(sm),
            max_sm_clock_mhz=int(max_sm) if _is_num(max_sm) else _na(max_sm),
            temperature_c=int(temp) if _is_num(temp) else _na(temp),
            throttle_reasons=self._throttle(handle),
            processes=self._processes(handle),
            monotonic_s=now,
        )

    def _throttle(self, handle: Any) -> Maybe[tuple[str, ...]]:
        # The "clocks event reasons" name is current; the "throttle reasons" one is deprecated (CUDA 14 drops it).
        mask = self._call("nvmlDeviceGetCurrentClocksEventReasons", handle)
        if isinstance(mask, NA):
            old = self._call("nvmlDeviceGetCurrentClocksThrottleReasons", handle)
            mask = old if not isinstance(old, NA) else mask
        if isinstance(mask, NA):
            return mask
        if not _is_num(mask):
            return NA(f"clock event reasons: unexpected {mask!r}")
        return throttle_names(int(mask))

    def _processes(self, handle: Any) -> Maybe[tuple[GpuProcess, ...]]:
        procs = self._call("nvmlDeviceGetComputeRunningProcesses", handle)
        if isinstance(procs, NA):
            return procs
        util = self._process_util(handle)
        out = []
        for p in procs or ():
            pid = getattr(p, "pid", None)
            if not isinstance(pid, int):
                continue
            used = getattr(p, "usedGpuMemory", None)
            used_bytes: Maybe[int] = used if isinstance(used, int) and used >= 0 else NA(
                "driver does not report per-process memory (MIG or container)"
            )
            if isinstance(util, NA):
                sm: Maybe[float] = util
            else:
                sm = util.get(pid, NA("no utilization sample for this process in the last window"))
            out.append(GpuProcess(pid=pid, used_memory_bytes=used_bytes, sm_util_pct=sm))
        return tuple(out)

    def _process_util(self, handle: Any) -> Maybe[dict[int, float]]:
        since_us = max(0, int((self._wall() - self._window_s) * 1e6))
        samples = self._call("nvmlDeviceGetProcessUtilization", handle, since_us)
        if isinstance(samples, NA):
            # NOT_FOUND means "no samples since the timestamp": the processes were idle, which is a reading.
            if "not found" in samples.reason and "function" not in samples.reason:
                return {}
            return samples
        newest: dict[int, tuple[int, float]] = {}
        for s in samples or ():
            pid, stamp, sm = getattr(s, "pid", None), getattr(s, "timeStamp", 0), getattr(s, "smUtil", None)
            if isinstance(pid, int) and _is_num(sm) and (pid not in newest or stamp >= newest[pid][0]):
                newest[pid] = (stamp, float(sm))
        return {pid: value for pid, (_, value) in newest.items()}

    # --- GPM: the SM pipes over a window -----------------------------------------------------------------

    def gpm_begin(self) -> Maybe[GpmWindow]:
        """The first GPM sample of every GPU (NA when NVML is unusable); per GPU, NA when it has no GPM."""
        with self._lock:
            ready = self._ensure()
            if isinstance(ready, NA):
                return ready
            count = self._call("nvmlDeviceGetCount")
            if isinstance(count, NA):
                return count
            if not isinstance(count, int) or count <= 0:
                return NA("NVML sees no GPU")
            devices: list[tuple[int, Any, Any, Any] | tuple[int, NA]] = []
            for index in range(count):
                devices.append(self._gpm_first(index))
            return GpmWindow(started_s=self._clock(), devices=tuple(devices))

    def _gpm_first(self, index: int) -> tuple[int, Any, Any, Any] | tuple[int, NA]:
        handle = self._call("nvmlDeviceGetHandleByIndex", index)
        if isinstance(handle, NA):
            return index, handle
        support = self._call("nvmlGpmQueryDeviceSupport", handle)
        if isinstance(support, NA):
            return index, support
        if not getattr(support, "isSupportedDevice", 0):
            return index, NA("GPM is not supported on this GPU (Hopper or newer)")
        first = self._call("nvmlGpmSampleAlloc")
        second = self._call("nvmlGpmSampleAlloc")
        for sample in (first, second):
            if isinstance(sample, NA):
                self._gpm_free(first, second)
                return index, sample
        taken = self._call("nvmlGpmSampleGet", handle, first)
        if isinstance(taken, NA):
            self._gpm_free(first, second)
            return index, taken
        return index, handle, first, second

    def gpm_end(self, window: GpmWindow) -> tuple[GpmReading, ...]:
        """The second sample and the metrics between the two, one reading per GPU (its fields NA with the reason
        when it could not be read). Frees the samples: a window is ended once."""
        with self._lock:
            elapsed = self._clock() - window.started_s
            out = []
            for device in window.devices:
                if len(device) == 2:
                    out.append(_gpm_na(device[0], elapsed, device[1]))  # type: ignore[arg-type]
                    continue
                index, handle, first, second = device  # type: ignore[misc]
                try:
                    out.append(self._gpm_metrics(index, handle, first, second, elapsed))
                finally:
                    self._gpm_free(first, second)
            return tuple(out)

    def _gpm_metrics(self, index: int, handle: Any, first: Any, second: Any, elapsed: float) -> GpmReading:
        taken = self._call("nvmlGpmSampleGet", handle, second)
        if isinstance(taken, NA):
            return _gpm_na(index, elapsed, taken)
        if elapsed < MIN_GPM_WINDOW_S:
            return _gpm_na(index, elapsed, NA(f"GPM window of {elapsed:.2f} s: under {MIN_GPM_WINDOW_S} s it reads "
                                              "zeros (measured on an H200)"))
        struct = getattr(self._module, "c_nvmlGpmMetricsGet_t", None)
        if struct is None:
            return _gpm_na(index, elapsed, NA("c_nvmlGpmMetricsGet_t is not in this nvidia-ml-py"))
        request = struct()
        request.version = getattr(self._module, "NVML_GPM_METRICS_GET_VERSION", 1)
        request.numMetrics = len(GPM_METRIC_IDS)
        request.sample1, request.sample2 = first, second
        for slot, (_, metric) in enumerate(GPM_METRIC_IDS):
            request.metrics[slot].metricId = metric
        got = self._call("nvmlGpmMetricsGet", request)
        if isinstance(got, NA):
            return _gpm_na(index, elapsed, got)
        values: dict[str, Maybe[float]] = {}
        for slot, (name, _) in enumerate(GPM_METRIC_IDS):
            metric = got.metrics[slot]
            code = getattr(metric, "nvmlReturn", 0)
            value = getattr(metric, "value", None)
            if code:
                values[name] = NA(f"GPM {name}: {_ERROR_NAMES.get(code, f'NVML error {code}')}")
            else:
                values[name] = float(value) if _is_num(value) else NA(f"GPM {name}: no value")
        return GpmReading(index=index, window_s=elapsed, **values)

    def _gpm_free(self, *samples: Any) -> None:
        for sample in samples:
            if not isinstance(sample, NA):
                self._call("nvmlGpmSampleFree", sample)

    def close(self) -> None:
        with self._lock:
            if self._init is True:
                self._call("nvmlShutdown")
            self._init = None


@dataclass(frozen=True)
class GpmWindow:
    """Begun GPM windows: per GPU (index, handle, first sample, second sample) or (index, why it has none)."""

    started_s: float
    devices: tuple[tuple[int, Any, Any, Any] | tuple[int, NA], ...]


def _gpm_na(index: int, elapsed: float, reason: NA) -> GpmReading:
    return GpmReading(index=index, window_s=elapsed, **{name: reason for name, _ in GPM_METRIC_IDS})


def _is_num(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _na(value: Any) -> NA:
    return value if isinstance(value, NA) else NA(f"unexpected NVML value {value!r}")


def _attr_num(obj: Any, attr: str) -> Maybe[float]:
    if isinstance(obj, NA):
        return obj
    value = getattr(obj, attr, None)
    return float(value) if _is_num(value) else NA(f"NVML gave no {attr}")


def _attr_int(obj: Any, attr: str) -> Maybe[int]:
    if isinstance(obj, NA):
        return obj
    value = getattr(obj, attr, None)
    return int(value) if _is_num(value) else NA(f"NVML gave no {attr}")


def _empty(index: int, reason: NA, now: float) -> GpuSample:
    return GpuSample(index=index, name="?", uuid="?", util_pct=reason, mem_util_pct=reason,
                     memory_used_bytes=reason, memory_total_bytes=reason, power_w=reason, power_limit_w=reason,
                     sm_clock_mhz=reason, max_sm_clock_mhz=reason, temperature_c=reason, throttle_reasons=reason,
                     processes=reason, monotonic_s=now)
