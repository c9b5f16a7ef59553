"""A torch.profiler trace of one process (``record --kernels``, or a trace torch.profiler exported) and its summary.

The trace is kept as spans on its own clock (torch.profiler's microseconds); ``ClockMap`` places them on the
system's monotonic clock, which our samples use. The summary (``analysis.kernels``) is what ``doctor`` weighs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

# torch.profiler's categories (its Chrome trace's ``cat``): what runs on a GPU, the host calls that launch it, and
# the host's own spans (ops, the program's and torch's annotations, Python functions with with_stack).
GPU_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
LAUNCH_CATS = frozenset({"cuda_runtime", "cuda_driver"})
HOST_CATS = frozenset({"cpu_op", "user_annotation", "python_function"})
TRACE_CATS = GPU_CATS | LAUNCH_CATS | HOST_CATS


@dataclass(frozen=True, slots=True)
class TraceSpan:
    cat: str  # one of TRACE_CATS
    name: str
    start_us: float  # on the trace's own clock
    dur_us: float
    tid: int  # host spans: the thread's native id; GPU spans: the stream
    device: int | None = None  # GPU spans: the device index
    correlation: int | None = None  # GPU spans and launches: CUPTI's id that ties a kernel to its launch
    args: tuple[tuple[str, str | int | float | bool], ...] = ()  # a few of torch's own, for the trace

    @property
    def end_us(self) -> float:
        return self.start_us + self.dur_us


@dataclass(frozen=True, slots=True)
class StepMark:
    """An optimizer step that ended (``record --kernels``' step hook, or torch.profiler's ``ProfilerStep#N``)."""

    at_us: float  # on the trace's own clock
    tid: int | None


@dataclass(frozen=True, slots=True)
class ClockMap:
    """The trace's clock onto the system's monotonic clock: ``mono_us = t + offset_us + drift * (t - at_us)``.

    Measured from clock marks (empty spans the process recorded between two readings of its monotonic clock):
    ``uncertainty_us`` is half the narrowest bracket. ``method`` says how ("marks", or "wall clock" when no mark
    was found: torch's timestamps are Unix time)."""

    offset_us: float
    at_us: float = 0.0
    drift: float = 0.0  # microseconds per microsecond between the two ends' marks
    uncertainty_us: float | None = None
    method: str = "marks"
    marks: int = 0

    def mono_us(self, t_us: float) -> float:
        return t_us + self.offset_us + self.drift * (t_us - self.at_us)

    def trace_us(self, mono_us: float) -> float:
        """The inverse: a monotonic time onto the trace's clock."""
        return (mono_us - self.offset_us + self.drift * self.at_us) / (1.0 + self.drift)


@dataclass(frozen=True, slots=True)
class KernelWindow:
    """What ``doctor --kernel-window``'s recording was and cost the process (its outcome, as the process reported
    it): carried in the observation so that its replay reports it as the live run did."""

    cuda: bool
    torch: str | None = None  # the process's torch version
    steps: int | None = None  # optimizer steps the profiler saw
    stop_ms: float | None = None  # the profiler's stop and export in the process (they hold its GIL)
    export_ms: float | None = None
    torch_trace_bytes: int | None = None
    method: str = ""  # how the recording request got in (the attach method)


@dataclass(frozen=True)
class KernelTrace:
    pid: int | None  # the process it is of, when the trace says
    spans: tuple[TraceSpan, ...]  # in start order
    thread_names: Mapping[int, str] = field(default_factory=dict)
    steps: tuple[StepMark, ...] = ()
    spans_left_out: int = 0  # beyond the bound on what is read (the latest ones)
    source: str = ""  # the file, or "record --kernels"
    started_wall_s: float | None = None  # when the recording began (Unix time), for its age
    base_wall_ns: int | None = None  # torch's ``baseTimeNanoseconds``: trace µs + this = Unix time

    @property
    def window_us(self) -> tuple[float, float]:
        if not self.spans:
            return (0.0, 0.0)
        return (min(s.start_us for s in self.spans), max(s.end_us for s in self.spans))


# --- the summary (analysis.kernels) -------------------------------------------------------------------------


LAUNCH_BOUND = "launch-bound"  # the GPU idled until the next kernel was launched: the host was not ahead
AFTER_SYNC = "after-sync"  # the same, right after the launching thread waited for the GPU (a host sync)
QUEUED = "queued"  # the next kernel was launched before the GPU idled: it waited on something else
UNATTRIBUTED = "unattributed"  # no launch in the trace for the next kernel
GAP_KINDS = (LAUNCH_BOUND, AFTER_SYNC, QUEUED, UNATTRIBUTED)


@dataclass(frozen=True, slots=True)
class IdleSpan:
    device: int
    start_us: float
    dur_us: float
    kind: str  # GAP_KINDS
    tid: int | None  # the thread that launched the kernel the GPU waited for


@dataclass(frozen=True, slots=True)
class DeviceKernels:
    device: int
    window_us: float  # what the shares are of: the steps' span when steps were marked, else the trace's window
    busy_us: float  # the union of its kernels, copies and sets
    idle_us: dict[str, float]  # by GAP_KINDS, between two GPU spans, plus "edges" (before the first, after the last)
    idle_by_thread: dict[str, dict[int, float]]  # kind -> launching thread -> µs
    gpu_spans: int

    @property
    def idle_total_us(self) -> float:
        return max(0.0, self.window_us - self.busy_us)

    def share(self, kind: str) -> float:
        return self.idle_us.get(kind, 0.0) / self.window_us if self.window_us > 0 else 0.0


@dataclass(frozen=True, slots=True)
class KernelStat:
    name: str
    count: int
    total_us: float

    @property
    def mean_us(self) -> float:
        return self.total_us / self.count if self.count else 0.0


# How a GPU span that is a matrix multiply ran, from its kernel's name: on the tensor cores (``*tensorop*``, ``*_tf32*``,
# ``bf16``/``f16``, ``hmma``/``wgmma``, cuBLASLt's ``nvjet``), on the FP32 pipes (``sgemm``, ``*simt*``, ``*_ffma_*``),
# or not known from the name.
MATMUL_TENSOR = "tensor cores"
MATMUL_FP32 = "FP32 pipes"
MATMUL_UNKNOWN = "not known"
MATMUL_KINDS = (MATMUL_TENSOR, MATMUL_FP32, MATMUL_UNKNOWN)


@dataclass(frozen=True, slots=True)
class CopyStat:
    """The copies of one kind in a trace (``Memcpy HtoD (Pageable -> Device)`` is ``HtoD`` from ``Pageable``):
    how many, how many bytes, their GPU time, and how long the host calls that issued them held their threads."""

    direction: str  # HtoD, DtoH, DtoD, HtoH, PtoP
    host_memory: str  # Pageable, Pinned, Device (DtoD), or "" when the name does not say
    count: int
    bytes: int
    gpu_us: float
    host_us: float  # the issuing calls' time (cudaMemcpyAsync...): a pageable copy holds its thread until staged
    host_us_by_thread: tuple[tuple[int, float], ...] = ()  # issuing thread -> µs, most first

    @property
    def kind(self) -> str:
        return f"{self.direction} ({self.host_memory})" if self.host_memory else self.direction


@dataclass(frozen=True)
class KernelSummary:
    window_us: float  # the trace's window (first span to last)
    steps: int  # optimizer steps marked in it
    step_window_us: float | None  # from the first step mark to the last (what "of the step" means)
    devices: tuple[DeviceKernels, ...]
    gpu_time_by_thread: tuple[tuple[int, float, int], ...]  # (launching thread, µs, spans), most first
    gpu_time_by_phase: tuple[tuple[str, float], ...]  # forward / backward / optimizer / outside ops, most first
    top_kernels: tuple[KernelStat, ...]
    longest_idle: tuple[IdleSpan, ...]  # the longest host-bound gaps (launch-bound, after-sync)
    host_spans: int
    gpu_spans: int
    unattributed_gpu_us: float  # GPU time whose launch is not in the trace
    thread_names: Mapping[int, str] = field(default_factory=dict)
    source: str = ""
    started_wall_s: float | None = None
    spans_left_out: int = 0
    # The copies by kind (direction and host memory), most GPU time first.
    copies: tuple[CopyStat, ...] = ()
    # Kernel time in matrix multiplies by how they ran (MATMUL_KINDS), and of every kernel, in µs: the share of the
    # GPU's kernel time in fp32 matmuls on the FP32 pipes (no tensor cores) is the measured cost of that precision.
    matmul_us: tuple[tuple[str, float], ...] = ()
    kernel_us: float = 0.0
    top_fp32_matmuls: tuple[KernelStat, ...] = ()

    def matmul_share(self, kind: str) -> float:
        """The share of all kernel time in matmuls of ``kind``."""
        total = dict(self.matmul_us).get(kind, 0.0)
        return total / self.kernel_us if self.kernel_us > 0 else 0.0

    def thread_label(self, tid: int | None) -> str:
        if tid is None:
            return "?"
        return self.thread_names.get(tid) or f"thread {tid}"
