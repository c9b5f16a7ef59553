"""bench/trainer_phases.py: the trace arithmetic on a trace shaped like torch.profiler's export, and a CPU dry run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from trainer_helpers import ROOT

sys.path.insert(0, str(ROOT / "bench"))

from trainer_phases import kernel_times


def _x(cat: str, name: str, ts: float, dur: float, tid: int = 1, correlation: int | None = None) -> dict[str, Any]:
    event: dict[str, Any] = {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": tid}
    if correlation is not None:
        event["args"] = {"correlation": correlation, "stream": 7}
    return event


def test_kernels_belong_to_the_phase_they_were_launched_in_and_idle_is_the_gaps() -> None:
    trace = {"traceEvents": [
        _x("user_annotation", "phase:target_forward", 0, 100),
        _x("user_annotation", "phase:backward", 100, 200),
        _x("cuda_runtime", "cudaLaunchKernel", 10, 2, correlation=1),
        _x("cuda_driver", "cuLaunchKernelEx", 20, 2, correlation=2),  # a Triton kernel
        _x("cuda_runtime", "cudaLaunchKernel", 150, 2, tid=9, correlation=3),  # autograd's thread, during backward
        _x("cuda_runtime", "cudaLaunchKernel", 400, 2, correlation=4),  # after every phase
        _x("kernel", "gemm", 1000, 300, correlation=1),
        _x("kernel", "triton_conv", 1300, 200, correlation=2),
        _x("gpu_memcpy", "Memcpy DtoD", 1450, 100, correlation=3),  # overlaps the previous one (another stream)
        _x("kernel", "late", 1700, 100, correlation=4),
        _x("cpu_op", "aten::mm", 10, 5),
    ]}
    times = kernel_times(trace)
    assert times["kernel_ms"]["target_forward"] == pytest.approx(0.5)
    assert times["kernel_ms"]["backward"] == pytest.approx(0.1)
    assert times["kernel_ms"]["unattributed"] == pytest.approx(0.1)
    assert times["span_ms"] == pytest.approx(0.8)  # 1000 .. 1800 us
    assert times["busy_ms"] == pytest.approx(0.65)  # 1000-1550 and 1700-1800: the overlap counted once
    assert times["idle_ms"] == pytest.approx(0.15)


@pytest.mark.slow
def test_dry_run_on_the_cpu_writes_both_reports(tmp_path: Path) -> None:
    out = tmp_path / "phases"
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "trainer_phases.py"), "--preset", "tiny",
                           "--out", str(out), "--variants", "before,fused-loss,anchor-block-mask", "--steps", "1",
                           "--warmup", "1", "--modes", "before", "--rounds", "1", "--window-steps", "2",
                           "--second-preset", "none"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((out / "phases.json").read_text())
    assert [r["variant"] for r in result["phases"]] == ["before", "fused-loss", "anchor-block-mask"]
    for row in result["phases"]:
        assert row["step_ms"] > 0 and row["tokens_per_s"] > 0 and row["gpu_idle_pct"] is None  # N/A on a CPU
        assert set(row["phase_ms"]) == {"target_forward", "drafter_inputs", "drafter_forward", "loss", "backward",
                                        "optimizer"}
    assert result["modes"][0]["ratio_threaded_over_sequential"] > 0
    text = (out / "phases.md").read_text()
    assert "| target_forward |" in text and "wall time, no CUDA" in text and "threaded / sequential" in text
