"""NVML through a fake ``pynvml`` (this machine has no GPU), plus the real module's N/A on this CPU box."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from dflash_diag.model import NA
from dflash_diag.sources.nvml import NvmlSource, throttle_names


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


class FakeNvml:
    """The handful of pynvml functions and constants NvmlSource uses, with scriptable failures."""

    NVMLError = NVMLError
    NVML_CLOCK_SM = 1
    NVML_TEMPERATURE_GPU = 0

    def __init__(self, n: int = 2, fail: dict[str, int] | None = None) -> None:
        self.n = n
        self.fail = fail or {}
        self.calls: list[str] = []
        self.util_since: list[int] = []

    def _maybe_fail(self, name: str) -> None:
        self.calls.append(name)
        if name in self.fail:
            raise NVMLError(self.fail[name])

    def nvmlInit(self) -> None:
        self._maybe_fail("nvmlInit")

    def nvmlShutdown(self) -> None:
        self._maybe_fail("nvmlShutdown")

    def nvmlDeviceGetCount(self) -> int:
        self._maybe_fail("nvmlDeviceGetCount")
        return self.n

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        self._maybe_fail("nvmlDeviceGetHandleByIndex")
        return 100 + i

    def nvmlDeviceGetName(self, h: int) -> bytes:
        self._maybe_fail("nvmlDeviceGetName")
        return b"NVIDIA H200"

    def nvmlDeviceGetUUID(self, h: int) -> str:
        self._maybe_fail("nvmlDeviceGetUUID")
        return f"GPU-{h}"

    def nvmlDeviceGetUtilizationRates(self, h: int) -> Any:
        self._maybe_fail("nvmlDeviceGetUtilizationRates")
        return SimpleNamespace(gpu=97 if h == 100 else 12, memory=40)

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:
        self._maybe_fail("nvmlDeviceGetMemoryInfo")
        return SimpleNamespace(used=60 * 2**30, total=141 * 2**30, free=81 * 2**30)

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        self._maybe_fail("nvmlDeviceGetPowerUsage")
        return 612_000

    def nvmlDeviceGetEnforcedPowerLimit(self, h: int) -> int:
        self._maybe_fail("nvmlDeviceGetEnforcedPowerLimit")
        return 700_000

    def nvmlDeviceGetClockInfo(self, h: int, kind: int) -> int:
        self._maybe_fail("nvmlDeviceGetClockInfo")
        assert kind == self.NVML_CLOCK_SM
        return 1755

    def nvmlDeviceGetMaxClockInfo(self, h: int, kind: int) -> int:
        self._maybe_fail("nvmlDeviceGetMaxClockInfo")
        return 1980

    def nvmlDeviceGetTemperature(self, h: int, kind: int) -> int:
        self._maybe_fail("nvmlDeviceGetTemperature")
        return 61

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        self._maybe_fail("nvmlDeviceGetCurrentClocksEventReasons")
        return 0x4 | 0x20  # sw power cap + sw thermal

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[Any]:
        self._maybe_fail("nvmlDeviceGetComputeRunningProcesses")
        return [SimpleNamespace(pid=4242, usedGpuMemory=30 * 2**30), SimpleNamespace(pid=77, usedGpuMemory=None)]

    def nvmlDeviceGetProcessUtilization(self, h: int, since_us: int) -> list[Any]:
        self._maybe_fail("nvmlDeviceGetProcessUtilization")
        self.util_since.append(since_us)
        return [SimpleNamespace(pid=4242, timeStamp=1, smUtil=40, memUtil=10),
                SimpleNamespace(pid=4242, timeStamp=2, smUtil=88, memUtil=10)]


def test_reads_every_field() -> None:
    fake = FakeNvml()
    gpus = NvmlSource(fake, clock=lambda: 5.0, wall_clock=lambda: 1000.0).sample()
    assert isinstance(gpus, tuple) and len(gpus) == 2
    g = gpus[0]
    assert (g.index, g.name, g.uuid) == (0, "NVIDIA H200", "GPU-100")
    assert g.util_pct == 97.0 and g.mem_util_pct == 40.0 and gpus[1].util_pct == 12.0
    assert g.memory_used_bytes == 60 * 2**30 and g.memory_total_bytes == 141 * 2**30
    assert g.power_w == 612.0 and g.power_limit_w == 700.0
    assert g.sm_clock_mhz == 1755 and g.max_sm_clock_mhz == 1980 and g.temperature_c == 61
    assert g.throttle_reasons == ("sw_power_cap", "sw_thermal_slowdown")
    assert g.monotonic_s == 5.0
    assert isinstance(g.processes, tuple)
    procs = {p.pid: p for p in g.processes}
    assert procs[4242].used_memory_bytes == 30 * 2**30 and procs[4242].sm_util_pct == 88.0  # newest sample
    assert isinstance(procs[77].used_memory_bytes, NA) and isinstance(procs[77].sm_util_pct, NA)
    assert fake.util_since[0] == int((1000.0 - 5.0) * 1e6)  # only the last window's samples


def test_not_supported_is_na_per_field() -> None:
    fake = FakeNvml(n=1, fail={"nvmlDeviceGetPowerUsage": 3, "nvmlDeviceGetCurrentClocksEventReasons": 3,
                               "nvmlDeviceGetProcessUtilization": 3})
    (g,) = NvmlSource(fake).sample()  # type: ignore[misc]
    assert isinstance(g.power_w, NA) and "not supported" in g.power_w.reason
    assert g.power_limit_w == 700.0 and g.util_pct == 97.0  # the other readings survive
    assert isinstance(g.throttle_reasons, NA)
    assert isinstance(g.processes, tuple)
    assert all(isinstance(p.sm_util_pct, NA) and "not supported" in p.sm_util_pct.reason for p in g.processes)


def test_old_driver_throttle_reasons_fallback() -> None:
    fake = FakeNvml(n=1, fail={"nvmlDeviceGetCurrentClocksEventReasons": 13})
    fake.nvmlDeviceGetCurrentClocksThrottleReasons = lambda h: 0x1  # type: ignore[attr-defined]
    (g,) = NvmlSource(fake).sample()  # type: ignore[misc]
    assert g.throttle_reasons == ("gpu_idle",)


def test_no_process_samples_is_an_empty_reading() -> None:
    fake = FakeNvml(n=1, fail={"nvmlDeviceGetProcessUtilization": 6})  # NVML_ERROR_NOT_FOUND: idle processes
    (g,) = NvmlSource(fake).sample()  # type: ignore[misc]
    assert isinstance(g.processes, tuple)
    assert all(isinstance(p.sm_util_pct, NA) and "no utilization sample" in p.sm_util_pct.reason for p in g.processes)


def test_lost_gpu_is_na_for_that_device_only() -> None:
    fake = FakeNvml(n=1, fail={"nvmlDeviceGetHandleByIndex": 15})
    (g,) = NvmlSource(fake).sample()  # type: ignore[misc]
    assert isinstance(g.util_pct, NA) and "lost" in g.util_pct.reason


@pytest.mark.parametrize(
    ("fail", "reason"),
    [
        ({"nvmlInit": 12}, "no NVML (libnvidia-ml.so not found)"),
        ({"nvmlInit": 9}, "no NVML: driver not loaded"),
        ({"nvmlDeviceGetCount": 999}, "nvmlDeviceGetCount: unknown NVML error"),
    ],
)
def test_nvml_unusable_is_na(fail: dict[str, int], reason: str) -> None:
    result = NvmlSource(FakeNvml(fail=fail)).sample()
    assert isinstance(result, NA) and result.reason == reason


def test_zero_gpus_and_init_once() -> None:
    fake = FakeNvml(n=0)
    src = NvmlSource(fake)
    assert isinstance(src.sample(), NA)
    assert isinstance(src.sample(), NA)
    assert fake.calls.count("nvmlInit") == 1
    src.close()
    assert "nvmlShutdown" in fake.calls


def test_a_broken_binding_does_not_raise() -> None:
    fake = FakeNvml(n=1)
    fake.nvmlDeviceGetTemperature = lambda h, k: 1 / 0  # type: ignore[method-assign,assignment]
    (g,) = NvmlSource(fake).sample()  # type: ignore[misc]
    assert isinstance(g.temperature_c, NA) and "ZeroDivisionError" in g.temperature_c.reason


def test_throttle_names_unknown_bits() -> None:
    assert throttle_names(0) == ()
    assert throttle_names(0x8 | 0x40 | 0x10000) == ("hw_slowdown", "hw_thermal_slowdown", "other(0x10000)")


def test_real_pynvml_on_this_cpu_box() -> None:
    """nvidia-ml-py is installed here but libnvidia-ml.so is not: N/A with that reason, no exception."""
    pytest.importorskip("pynvml")
    result = NvmlSource().sample()
    if not isinstance(result, NA):
        pytest.skip("this machine has a working NVML")
    assert result.reason == "no NVML (libnvidia-ml.so not found)"
    assert str(result) == "N/A: no NVML (libnvidia-ml.so not found)"


# --- GPM: the SM pipes over a window (Hopper+) -------------------------------------------------------------------

# What the H200 read (measured by hand, bf16 8192^3 matmuls; docs/benchmarks.md): SM, occupancy, any tensor, HMMA,
# FP32, DRAM. The fake answers these for GPU 0; GPU 1 has no GPM (an older GPU).
H200_BF16 = {2: 94.9, 3: 14.0, 5: 92.1, 7: 92.1, 10: 16.0, 12: 0.0, 13: 0.0}


class _Metric:
    def __init__(self) -> None:
        self.metricId = 0
        self.nvmlReturn = 0
        self.value = 0.0


class _MetricsGet:
    """c_nvmlGpmMetricsGet_t's fields, as the ctypes struct has them."""

    def __init__(self) -> None:
        self.version = 0
        self.numMetrics = 0
        self.sample1: Any = None
        self.sample2: Any = None
        self.metrics = [_Metric() for _ in range(16)]


class FakeGpmNvml(FakeNvml):
    NVML_GPM_METRICS_GET_VERSION = 1
    c_nvmlGpmMetricsGet_t = _MetricsGet

    def __init__(self, *args: Any, unsupported_metric: int | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.allocated: set[int] = set()
        self.next_sample = 0
        self.unsupported_metric = unsupported_metric

    def nvmlGpmQueryDeviceSupport(self, h: int) -> Any:
        self._maybe_fail("nvmlGpmQueryDeviceSupport")
        return SimpleNamespace(version=1, isSupportedDevice=1 if h == 100 else 0)

    def nvmlGpmSampleAlloc(self) -> int:
        self._maybe_fail("nvmlGpmSampleAlloc")
        self.next_sample += 1
        self.allocated.add(self.next_sample)
        return self.next_sample

    def nvmlGpmSampleFree(self, sample: int) -> None:
        self.allocated.discard(sample)

    def nvmlGpmSampleGet(self, h: int, sample: int) -> int:
        self._maybe_fail("nvmlGpmSampleGet")
        return sample

    def nvmlGpmMetricsGet(self, request: _MetricsGet) -> _MetricsGet:
        self._maybe_fail("nvmlGpmMetricsGet")
        assert request.version == 1 and request.sample1 != request.sample2
        for metric in request.metrics[: request.numMetrics]:
            if metric.metricId == self.unsupported_metric:
                metric.nvmlReturn = 3
            else:
                metric.value = H200_BF16[metric.metricId]
        return request


def test_gpm_reads_the_pipes_of_a_supported_gpu_and_says_why_not_of_the_others() -> None:
    clock = [10.0]
    fake = FakeGpmNvml(unsupported_metric=13)
    source = NvmlSource(fake, clock=lambda: clock[0])
    window = source.gpm_begin()
    assert not isinstance(window, NA)
    clock[0] += 1.0
    hopper, older = source.gpm_end(window)
    assert hopper.window_s == 1.0 and hopper.any_tensor_pct == 92.1 and hopper.fp32_pct == 0.0
    assert hopper.sm_util_pct == 94.9 and hopper.sm_occupancy_pct == 14.0 and hopper.dram_bw_pct == 16.0
    assert isinstance(hopper.fp16_pct, NA) and "not supported" in hopper.fp16_pct.reason
    assert isinstance(older.any_tensor_pct, NA) and "Hopper or newer" in older.any_tensor_pct.reason
    assert fake.allocated == set()  # every sample freed


def test_a_gpm_window_under_0_7_s_is_refused_not_read_as_zeros() -> None:
    clock = [10.0]
    fake = FakeGpmNvml()
    source = NvmlSource(fake, clock=lambda: clock[0])
    window = source.gpm_begin()
    assert not isinstance(window, NA)
    clock[0] += 0.06
    (reading, _) = source.gpm_end(window)
    assert isinstance(reading.any_tensor_pct, NA) and "under 0.7 s" in reading.any_tensor_pct.reason
    assert fake.allocated == set()


def test_gpm_failures_are_values() -> None:
    fake = FakeGpmNvml(fail={"nvmlGpmSampleGet": 3})
    source = NvmlSource(fake, clock=lambda: 0.0)
    window = source.gpm_begin()
    assert not isinstance(window, NA)
    reading = source.gpm_end(window)[0]
    assert isinstance(reading.sm_util_pct, NA) and "not supported" in reading.sm_util_pct.reason
    assert fake.allocated == set()


def test_gpm_without_nvml_here_is_na() -> None:
    window = NvmlSource().gpm_begin()  # this CPU box: no libnvidia-ml.so
    assert isinstance(window, NA) and "NVML" in window.reason
