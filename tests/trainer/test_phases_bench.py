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


def test_the_idle_share_of_a_window_starts_after_its_last_graph_capture() -> None:
    from trainer_phases import steady_kernels

    trace = {"traceEvents": [
        _x("kernel", "warm-up", 0, 50),
        _x("cuda_runtime", "cudaStreamEndCapture", 100, 10),
        _x("kernel", "first replay", 90, 5),  # started before the capture ended: not steady state
        _x("cuda_driver", "cuGraphInstantiateWithFlags", 300, 20),  # the drafter's capture, later
        _x("kernel", "steady", 400, 100),
        _x("gpu_memcpy", "copy in", 330, 10),
    ]}
    assert [k["name"] for k in steady_kernels(trace)] == ["steady", "copy in"]
    plain = {"traceEvents": [_x("kernel", "a", 0, 5), _x("kernel", "b", 10, 5)]}
    assert [k["name"] for k in steady_kernels(plain)] == ["a", "b"]  # no capture: every span, as before


def test_loss_rel_diff_compares_the_steps_both_ran() -> None:
    from trainer_phases import loss_rel_diff

    base = {"losses": [10.0, 5.0, 4.0]}
    assert loss_rel_diff({"losses": [10.0, 5.5]}, base) == pytest.approx(0.1)
    assert loss_rel_diff({"losses": []}, base) is None and loss_rel_diff({"losses": [1.0]}, None) is None


def test_idle_by_phase_is_the_phase_time_its_kernels_do_not_fill() -> None:
    from trainer_phases import idle_by_phase

    phase_ms = {"target_forward": 10.0, "loss": 5.0, "between_steps": 1.0}
    kernel_ms = {"target_forward": 8.0, "loss": 5.5, "unattributed": 0.0}  # profiled: may exceed a phase's time
    got = idle_by_phase(phase_ms, kernel_ms)
    assert got["idle_by_phase_ms"]["target_forward"] == pytest.approx(2.0)
    assert got["idle_by_phase_ms"]["loss"] == 0.0 and got["idle_by_phase_ms"]["between_steps"] == pytest.approx(1.0)
    assert got["gpu_idle_events_pct"] == pytest.approx(100.0 * 2.5 / 16.0)


@pytest.mark.slow
def test_dry_run_on_the_cpu_writes_both_reports(tmp_path: Path) -> None:
    out = tmp_path / "phases"
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "trainer_phases.py"), "--preset", "tiny",
                           "--out", str(out), "--variants", "defaults,cuda-graphs-all,length-buckets", "--steps", "1",
                           "--warmup", "1", "--modes", "all", "--rounds", "1", "--window-steps", "2"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((out / "phases.json").read_text())
    check = result["graph_check"]
    assert check["ok"] and check["max_abs_diff_two_threads_vs_one"] == 0.0 and "refused" in check["foreign_replay"]
    assert [r["variant"] for r in result["phases"]] == ["defaults", "cuda-graphs-all", "length-buckets"]
    for row in result["phases"]:
        assert "error" not in row, row
        assert row["step_ms"] > 0 and row["tokens_per_s"] > 0 and row["gpu_idle_pct"] is None  # N/A on a CPU
        assert set(row["phase_ms"]) == {"target_forward", "drafter_inputs", "drafter_forward", "loss", "backward",
                                        "drafter_graph", "optimizer", "between_steps"}
    losses = {r["variant"]: r["losses"] for r in result["phases"]}
    assert all(len(v) == 2 for v in losses.values())  # --warmup 1 + --steps 1
    for name in ("cuda-graphs-all", "length-buckets"):  # same seed, same batches: the same training
        assert losses[name] == pytest.approx(losses["defaults"], rel=1e-4)
    graphed = result["phases"][1]
    assert graphed["phase_ms"]["drafter_graph"] > 0 and graphed["phase_ms"]["backward"] == 0.0
    assert {s["kind"] for s in graphed["graphs"].values()} == {"emulated"}
    assert result["modes"][0]["variant"] == "all" and result["modes"][0]["ratio_threaded_over_sequential"] > 0
    text = (out / "phases.md").read_text()
    assert "| target_forward |" in text and "wall time, no CUDA" in text and "threaded / sequential" in text
    assert "two threads replaying at once vs one thread" in text and "loss vs defaults" in text
