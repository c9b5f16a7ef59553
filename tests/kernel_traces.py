"""Chrome traces in the form torch.profiler (Kineto) exports them, built event by event for the kernel-summary
tests: GPU spans with ``pid`` = the device and ``tid`` = the stream, ``args`` with ``device``, ``stream`` and
``correlation``; the CUDA calls that launched them (``cuda_runtime``) on the launching thread with the same
correlation; ``ac2g`` flow events; CPU ops; timestamps in microseconds after ``baseTimeNanoseconds``, as large as
torch's (about 5e12) so float precision is exercised as it is in real traces.

``tests/fixtures/kernels/synthetic_torch_trace.json`` was written by :func:`handmade` (its numbers are worked out
in tests/analysis/test_kernel_summary.py). A real trace of the H200 can take its place: see that file's README.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

PID = 4242
BASE_NS = 1_790_000_000_000_000_000
T0_US = 5_323_486_721_000.0  # torch's timestamps are µs after the base: this large


@dataclass
class TorchTrace:
    pid: int = PID
    events: list[dict[str, Any]] = field(default_factory=list)
    names: dict[int, str] = field(default_factory=dict)
    streams: set[tuple[int, int]] = field(default_factory=set)

    def thread(self, tid: int, name: str) -> TorchTrace:
        self.names[tid] = name
        return self

    def op(self, tid: int, name: str, start: float, end: float, cat: str = "cpu_op") -> TorchTrace:
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": self.pid, "tid": tid, "ts": T0_US + start,
                            "dur": end - start, "args": {"External id": len(self.events) + 1}})
        return self

    def launch(self, tid: int, start: float, corr: int, name: str = "cudaLaunchKernel", dur: float = 10.0) -> TorchTrace:
        self.events.append({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": self.pid, "tid": tid,
                            "ts": T0_US + start, "dur": dur, "args": {"cbid": 211, "correlation": corr}})
        self.events.append({"ph": "s", "id": corr, "pid": self.pid, "tid": tid, "ts": T0_US + start, "cat": "ac2g",
                            "name": "ac2g"})
        return self

    def gpu(self, name: str, start: float, end: float, corr: int, *, device: int = 0, stream: int = 7,
            cat: str = "kernel", nbytes: int | None = None) -> TorchTrace:
        self.streams.add((device, stream))
        args: dict[str, Any] = {"device": device, "context": 1, "stream": stream, "correlation": corr}
        if cat == "gpu_memcpy":  # torch's copies carry their size and bandwidth, not a launch geometry
            args.update({"bytes": nbytes or 0, "memory bandwidth (GB/s)": (nbytes or 0) / max(end - start, 1e-3) / 1e3})
        else:
            args.update({"grid": [4, 1, 1], "block": [128, 1, 1], "registers per thread": 32, "shared memory": 0})
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": device, "tid": stream, "ts": T0_US + start,
                            "dur": end - start, "args": args})
        self.events.append({"ph": "f", "id": corr, "pid": device, "tid": stream, "ts": T0_US + start, "cat": "ac2g",
                            "name": "ac2g", "bp": "e"})
        return self

    def doc(self) -> dict[str, Any]:
        meta: list[dict[str, Any]] = [{"name": "process_name", "ph": "M", "ts": T0_US, "pid": self.pid, "tid": 0,
                                       "args": {"name": "python"}}]
        meta += [{"name": "thread_name", "ph": "M", "ts": T0_US, "pid": self.pid, "tid": tid,
                  "args": {"name": f"thread {tid} (python)"}} for tid in sorted(self.names)]
        for device, stream in sorted(self.streams):
            meta.append({"name": "process_name", "ph": "M", "ts": T0_US, "pid": device, "tid": 0,
                         "args": {"name": "python"}})
            meta.append({"name": "thread_name", "ph": "M", "ts": T0_US, "pid": device, "tid": stream,
                         "args": {"name": f"stream {stream} "}})
        return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H200"}],
                "baseTimeNanoseconds": BASE_NS, "traceEvents": meta + self.events, "traceName": "synthetic"}

    def data(self) -> bytes:
        return json.dumps(self.doc()).encode()


A, B = 101, 102  # the launching threads of the handmade trace


def handmade() -> TorchTrace:
    """One of each gap kind, phase and launcher (the numbers are worked out in test_kernel_summary.py)."""
    t = TorchTrace().thread(A, "drafter-0").thread(B, "target-0")
    t.op(A, "aten::linear", 0, 400).launch(A, 10, 1).gpu("void sgemm_a<float>(float*)", 30, 1030, 1)
    t.op(A, "aten::relu", 1100, 1200).launch(A, 1110, 2).gpu("relu_kernel", 1130, 1230, 2)
    t.op(B, "aten::mm", 1150, 1300).launch(B, 1160, 3).gpu("void sgemm_b<float>(float*)", 1230, 2230, 3)
    t.op(A, "autograd::engine::evaluate_function: MmBackward0", 2000, 2600).op(A, "MmBackward0", 2050, 2590)
    t.launch(A, 2100, 4).gpu("sgemm_bwd", 2240, 3240, 4)
    t.op(A, "aten::item", 2990, 3250).launch(A, 3000, 90, name="cudaStreamSynchronize", dur=245)
    t.op(A, "Optimizer.step#SGD.step", 3300, 3700, cat="user_annotation").launch(A, 3400, 5)
    t.gpu("sgd_kernel", 3420, 3520, 5)
    t.launch(B, 3600, 6, name="cudaMemcpyAsync").gpu("Memcpy HtoD (Pageable -> Device)", 3620, 3720, 6, cat="gpu_memcpy")
    t.gpu("orphan_kernel", 4000, 4100, 99)  # its launch is not in the trace
    t.op(B, "aten::copy_", 4500, 5000)
    return t


def launch_loop(*, steps: int, kernels_per_step: int, kernel_us: float, host_gap_us: float, ahead: bool,
                tid: int = A, name: str = "drafter-0") -> TorchTrace:
    """A thread that launches ``kernels_per_step`` kernels of ``kernel_us`` per step. ``ahead``: it launches each
    one well before the GPU needs it (GPU-bound: no gap); else it launches each only ``host_gap_us`` after the
    previous one ended (launch-bound: a gap of ``host_gap_us`` before every kernel). Each step ends in an optimizer
    step annotation (``ProfilerStep#N``, as a scheduled torch.profiler marks them)."""
    t = TorchTrace().thread(tid, name)
    now, corr = 0.0, 1
    for step in range(steps):
        step_start = now
        for _ in range(kernels_per_step):
            if ahead:
                launch_at = now - kernel_us  # queued while the previous one runs
                start = now
            else:
                launch_at = now + host_gap_us - 12.0
                start = now + host_gap_us
            t.op(tid, "aten::mm", launch_at - 2.0, launch_at + 11.0).launch(tid, launch_at, corr)
            t.gpu("void gemm_kernel<float>(float*)", start, start + kernel_us, corr)
            now = start + kernel_us
            corr += 1
        t.op(tid, f"ProfilerStep#{step}", step_start, now, cat="user_annotation")
    return t
