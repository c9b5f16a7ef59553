"""What a torch.profiler trace says about the GPU: busy and idle time per device, who launched what, which phase of
the step, the top kernels, and why the GPU idled between kernels. Pure.

Each GPU span (kernel, copy, set) is tied to the host call that launched it by CUPTI's correlation id; that call
ran on a thread (the *launching thread*) inside the host's ops, which give the *phase*: ``optimizer`` inside
``Optimizer.step``/``zero_grad`` (torch annotates both), ``backward`` inside the autograd engine's functions or a
``*Backward*`` op, ``forward`` inside any other op, ``outside ops`` for a launch no op encloses (a Triton kernel
called from Python).

An idle gap between two GPU spans of a device is judged by the launch of the span that ends it:

- **launch-bound**: that launch began only after the GPU had gone idle: the GPU waited for the host (Python, the
  GIL, the launch path itself). The gap is the launching thread's;
- **after-sync**: the same, right after the launching thread waited for the GPU in a host sync
  (``cudaStreamSynchronize`` and kin, ``.item()``): the sync drained the queue, the host then had to launch again;
- **queued**: it was launched before the GPU idled and still started late (a dependency on another stream, an
  event): not the host's doing;
- **unattributed**: its launch is not in the trace.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

from dflash_diag.model.kernels import (
    AFTER_SYNC,
    GPU_CATS,
    HOST_CATS,
    LAUNCH_BOUND,
    LAUNCH_CATS,
    MATMUL_FP32,
    MATMUL_TENSOR,
    MATMUL_UNKNOWN,
    QUEUED,
    UNATTRIBUTED,
    CopyStat,
    DeviceKernels,
    IdleSpan,
    KernelStat,
    KernelSummary,
    KernelTrace,
    TraceSpan,
)

EDGES = "edges"  # idle before the first GPU span of the window or after the last: no launch to judge it by
# Host calls that wait for the GPU: the runtime's and the driver's syncs, blocking copies, and torch's ops that
# read a device value back (``.item()``).
SYNC_CALLS = frozenset({
    "cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy", "cudaMemcpy2D",
    "cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize", "cuMemcpyDtoH_v2",
    "aten::item", "aten::_local_scalar_dense",
})
# A sync that returned this long before the GPU went idle did not cause the gap.
SYNC_SLACK_US = 50.0
TOP_KERNELS = 10
LONGEST_IDLE = 5
OPTIMIZER_PREFIXES = ("Optimizer.step", "Optimizer.zero_grad")
BACKWARD_PREFIXES = ("autograd::engine::evaluate_function",)
PHASES = ("forward", "backward", "optimizer", "outside ops", "unattributed")


# A matrix multiply's kernel, by its name: cuBLAS/cuBLASLt (``*gemm*``, ``nvjet_*``, ``sm90_xmma_*``), CUTLASS, and
# torch's own bmm/mm entry points. A gemv (``gemv2T_kernel``) is memory-bound and has no tensor-core path: not counted.
_MATMUL = re.compile(r"gemm|nvjet|xmma|cutlass|wgmma|\bmatmul|_mma_|hmma", re.I)
# On the tensor cores: TF32, half and bf16 tensor ops (``s1688``/``s16816`` are cuBLAS's TF32 tensor-op tiles,
# ``h884``/``h1688``/``h16816`` half's, ``i8816`` int8's), Hopper's ``wgmma``/``gmma``, cuBLASLt's ``nvjet`` kernels.
_TENSOR = re.compile(r"tensorop|tf32|hmma|wgmma|gmma|imma|bf16|f16|fp16|half|nvjet|h884|h1688|h16816|s1688|s16816"
                     r"|i8816|e4m3|e5m2|fp8", re.I)
# On the FP32 pipes: single-precision SIMT kernels (``sgemm``, CUTLASS's ``simt``, cuBLAS's ``*_ffma_*`` tiles).
_FP32 = re.compile(r"sgemm|simt|ffma|gemmSN|gemmk1_kernel<float", re.I)
_COPY = re.compile(r"Memcpy (\w+) \((\w+) -> (\w+)\)")


def matmul_kind(name: str) -> str | None:
    """How a kernel that multiplies matrices ran (``model.kernels.MATMUL_KINDS``), or None for any other kernel."""
    if not _MATMUL.search(name) or "gemv" in name.lower():
        return None
    if _TENSOR.search(name):
        return MATMUL_TENSOR
    if _FP32.search(name):
        return MATMUL_FP32
    return MATMUL_UNKNOWN


def summarise(trace: KernelTrace) -> KernelSummary:
    """The summary of a trace (see the module docstring)."""
    spans = trace.spans
    gpu = [s for s in spans if s.cat in GPU_CATS]
    launch_of = {s.correlation: s for s in spans if s.cat in LAUNCH_CATS and s.correlation is not None}
    host = [s for s in spans if s.cat in HOST_CATS]
    w0, w1 = trace.window_us
    step_window = _step_window(trace)
    window = step_window or (w0, w1)
    syncs = _sync_ends(s for s in spans if s.name in SYNC_CALLS)
    devices: list[DeviceKernels] = []
    idle: list[IdleSpan] = []
    for device in sorted({s.device for s in gpu if s.device is not None}):
        on_device = sorted((s for s in gpu if s.device == device), key=lambda s: s.start_us)
        summary, gaps = _device(device, on_device, window, launch_of, syncs)
        devices.append(summary)
        idle += gaps
    phase_of = _phases(host, launch_of.values())
    by_thread: dict[int, list[float]] = {}
    by_phase: defaultdict[str, float] = defaultdict(float)
    unattributed = 0.0
    for s in gpu:
        launch = launch_of.get(s.correlation) if s.correlation is not None else None
        if launch is None:
            unattributed += s.dur_us
            by_phase["unattributed"] += s.dur_us
            continue
        entry = by_thread.setdefault(launch.tid, [0.0, 0.0])
        entry[0] += s.dur_us
        entry[1] += 1
        by_phase[phase_of.get(id(launch), "outside ops")] += s.dur_us
    host_bound = [g for g in idle if g.kind in (LAUNCH_BOUND, AFTER_SYNC)]
    kernels = [s for s in gpu if s.cat == "kernel"]
    matmul, fp32 = _matmuls(kernels)
    return KernelSummary(
        window_us=max(0.0, w1 - w0),
        steps=_step_count(trace),
        step_window_us=(step_window[1] - step_window[0]) if step_window else None,
        devices=tuple(devices),
        gpu_time_by_thread=tuple(sorted(((tid, v[0], int(v[1])) for tid, v in by_thread.items()), key=lambda x: -x[1])),
        gpu_time_by_phase=tuple(sorted(((p, us) for p, us in by_phase.items() if us > 0), key=lambda x: -x[1])),
        top_kernels=_top(gpu),
        longest_idle=tuple(sorted(host_bound, key=lambda g: -g.dur_us)[:LONGEST_IDLE]),
        host_spans=len(host) + len(launch_of),
        gpu_spans=len(gpu),
        unattributed_gpu_us=unattributed,
        thread_names=dict(trace.thread_names),
        source=trace.source,
        started_wall_s=trace.started_wall_s,
        spans_left_out=trace.spans_left_out,
        copies=_copies(gpu, launch_of),
        matmul_us=matmul,
        kernel_us=sum(s.dur_us for s in kernels),
        top_fp32_matmuls=_top(fp32)[:3],
    )


def _matmuls(kernels: Sequence[TraceSpan]) -> tuple[tuple[tuple[str, float], ...], list[TraceSpan]]:
    """Kernel time in matmuls by how they ran, and the fp32 ones (on the FP32 pipes)."""
    by_kind: defaultdict[str, float] = defaultdict(float)
    fp32: list[TraceSpan] = []
    for s in kernels:
        kind = matmul_kind(s.name)
        if kind is None:
            continue
        by_kind[kind] += s.dur_us
        if kind == MATMUL_FP32:
            fp32.append(s)
    return tuple(sorted(by_kind.items(), key=lambda kv: -kv[1])), fp32


def _copies(gpu: Sequence[TraceSpan], launch_of: dict[int, TraceSpan]) -> tuple[CopyStat, ...]:
    """The copies by direction and host memory: count, bytes, GPU time, and the issuing calls' host time."""
    rows: dict[tuple[str, str], list[float]] = {}
    threads: dict[tuple[str, str], defaultdict[int, float]] = {}
    for s in gpu:
        if s.cat != "gpu_memcpy":
            continue
        match = _COPY.match(s.name)
        if match is None:
            key = (s.name.removeprefix("Memcpy ").split(" ")[0] or "copy", "")
        else:
            direction, src, dst = match.groups()
            key = (direction, src if direction.startswith("Hto") else dst if direction.endswith("toH") else src)
        size = dict(s.args).get("bytes")
        row = rows.setdefault(key, [0.0, 0.0, 0.0, 0.0])
        row[0] += 1
        row[1] += float(size) if isinstance(size, int | float) and not isinstance(size, bool) else 0.0
        row[2] += s.dur_us
        launch = launch_of.get(s.correlation) if s.correlation is not None else None
        if launch is not None:
            row[3] += launch.dur_us
            threads.setdefault(key, defaultdict(float))[launch.tid] += launch.dur_us
    out = [CopyStat(direction=k[0], host_memory=k[1], count=int(v[0]), bytes=int(v[1]), gpu_us=v[2], host_us=v[3],
                    host_us_by_thread=tuple(sorted(threads.get(k, {}).items(), key=lambda kv: -kv[1])[:8]))
           for k, v in rows.items()]
    return tuple(sorted(out, key=lambda c: (-c.gpu_us, c.kind)))


def _step_count(trace: KernelTrace) -> int:
    """Steps marked: those of the thread that marked most (replicas that step together count one step each)."""
    per_thread = Counter(m.tid for m in trace.steps)
    return max(per_thread.values(), default=0)


def _step_window(trace: KernelTrace) -> tuple[float, float] | None:
    """From the first step mark to the last, when two or more were marked: what "of the step" is measured over."""
    if _step_count(trace) < 2:
        return None
    first, last = trace.steps[0].at_us, trace.steps[-1].at_us
    return (first, last) if last > first else None


def _sync_ends(spans: Iterable[TraceSpan]) -> dict[int, list[float]]:
    out: dict[int, list[float]] = {}
    for s in spans:
        out.setdefault(s.tid, []).append(s.end_us)
    for ends in out.values():
        ends.sort()
    return out


def _synced_before(syncs: dict[int, list[float]], tid: int, gap_start_us: float, launch_us: float) -> bool:
    """Whether the thread came out of a host sync between the GPU going idle and its launch."""
    ends = syncs.get(tid)
    if not ends:
        return False
    i = bisect.bisect_left(ends, gap_start_us - SYNC_SLACK_US)
    return i < len(ends) and ends[i] <= launch_us


def _device(device: int, spans: Sequence[TraceSpan], window: tuple[float, float], launch_of: dict[int, TraceSpan],
            syncs: dict[int, list[float]]) -> tuple[DeviceKernels, list[IdleSpan]]:
    w0, w1 = window
    busy = 0.0
    idle: defaultdict[str, float] = defaultdict(float)
    by_thread: dict[str, defaultdict[int, float]] = {}
    gaps: list[IdleSpan] = []
    end: float | None = None  # where the GPU went idle (the end of the busy run so far)
    for s in spans:
        if end is not None and s.start_us <= end:  # overlaps the busy run: extends it
            if s.end_us > end:
                busy += _clip(end, s.end_us, w0, w1)
                end = s.end_us
            continue
        if end is None:
            idle[EDGES] += _clip(w0, s.start_us, w0, w1)
        else:
            dur = _clip(end, s.start_us, w0, w1)
            if dur > 0:
                kind, tid = _judge(s, end, launch_of, syncs)
                idle[kind] += dur
                if tid is not None:
                    by_thread.setdefault(kind, defaultdict(float))[tid] += dur
                gaps.append(IdleSpan(device=device, start_us=max(end, w0), dur_us=dur, kind=kind, tid=tid))
        busy += _clip(s.start_us, s.end_us, w0, w1)
        end = s.end_us
    if end is not None:
        idle[EDGES] += _clip(end, w1, w0, w1)
    window_us = max(0.0, w1 - w0)
    return DeviceKernels(device=device, window_us=window_us, busy_us=busy, idle_us=dict(idle),
                         idle_by_thread={k: dict(v) for k, v in by_thread.items()}, gpu_spans=len(spans)), gaps


def _clip(a: float, b: float, w0: float, w1: float) -> float:
    return max(0.0, min(b, w1) - max(a, w0))


def _judge(next_span: TraceSpan, idle_from_us: float, launch_of: dict[int, TraceSpan],
           syncs: dict[int, list[float]]) -> tuple[str, int | None]:
    launch = launch_of.get(next_span.correlation) if next_span.correlation is not None else None
    if launch is None:
        return UNATTRIBUTED, None
    if launch.start_us < idle_from_us:
        return QUEUED, launch.tid
    if _synced_before(syncs, launch.tid, idle_from_us, launch.start_us):
        return AFTER_SYNC, launch.tid
    return LAUNCH_BOUND, launch.tid


def phase(names: Iterable[str]) -> str:
    """The phase of a launch from the names of the host spans around it (innermost first or any order)."""
    names = list(names)
    if any(n.startswith(OPTIMIZER_PREFIXES) for n in names):
        return "optimizer"
    if any(n.startswith(BACKWARD_PREFIXES) or "Backward" in n for n in names):
        return "backward"
    return "forward" if names else "outside ops"


def _phases(host: Sequence[TraceSpan], launch_spans: Iterable[TraceSpan]) -> dict[int, str]:
    """id(launch) -> its phase, by a sweep of each thread's host spans (nested: a stack)."""
    by_tid: dict[int, list[TraceSpan]] = {}
    for s in host:
        by_tid.setdefault(s.tid, []).append(s)
    launches_by_tid: dict[int, list[TraceSpan]] = {}
    for launch in launch_spans:
        launches_by_tid.setdefault(launch.tid, []).append(launch)
    out: dict[int, str] = {}
    for tid, items in launches_by_tid.items():
        spans = sorted(by_tid.get(tid, ()), key=lambda s: (s.start_us, -s.dur_us))
        stack: list[TraceSpan] = []
        i = 0
        for launch in sorted(items, key=lambda s: s.start_us):
            while i < len(spans) and spans[i].start_us <= launch.start_us:
                while stack and stack[-1].end_us < spans[i].start_us:
                    stack.pop()
                stack.append(spans[i])
                i += 1
            while stack and stack[-1].end_us < launch.start_us:
                stack.pop()
            out[id(launch)] = phase(s.name for s in stack if s.start_us <= launch.start_us <= s.end_us)
    return out


def _top(gpu: Sequence[TraceSpan]) -> tuple[KernelStat, ...]:
    totals: dict[str, list[float]] = {}
    for s in gpu:
        entry = totals.setdefault(s.name, [0.0, 0.0])
        entry[0] += s.dur_us
        entry[1] += 1
    ranked = sorted(totals.items(), key=lambda kv: (-round(kv[1][0], 3), kv[0]))[:TOP_KERNELS]
    return tuple(KernelStat(name=name, count=int(v[1]), total_us=v[0]) for name, v in ranked)


def short_kernel_name(name: str, limit: int = 80) -> str:
    """A kernel's name without its template arguments (``void at::native::foo<float, 4>(...)`` -> ``at::native::foo``)."""
    text = name.removeprefix("void ")
    for cut in ("<", "("):
        if cut in text:
            text = text[: text.index(cut)]
    text = text.strip() or name
    return text if len(text) <= limit else text[: limit - 1] + "…"
