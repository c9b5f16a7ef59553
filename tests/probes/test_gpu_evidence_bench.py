"""bench/gpu_evidence_cost.py's own arithmetic (the GPU runs are the lead's): the residual ratios and their noise,
the report, and the CPU-side warning path the syncs probe takes per sync."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import gpu_evidence_cost as bench  # noqa: E402


def _window(step_ms: float, launch_us: float) -> dict[str, float]:
    return {"steps": 10, "steps_per_s": 5.0, "step_ms_median": step_ms, "launch_us_median": launch_us}


def test_the_residual_is_after_over_before_with_the_rounds_spread_beside_it() -> None:
    rounds = [{"before": _window(100.0, 5.0), "during": _window(120.0, 7.5), "after": _window(101.0, 5.5)},
              {"before": _window(102.0, 5.0), "during": _window(125.0, 7.0), "after": _window(99.96, 5.0)}]
    summary = bench._residual(rounds)
    assert summary["step_ms_after_over_before"] == [1.01, 0.98]
    assert summary["launch_us_after_over_before"] == [1.1, 1.0]  # a launch tax left behind would show here
    assert summary["launch_us_during_over_before"] == [1.5, 1.4]
    assert summary["before_step_ms_spread"] == 1.02 and summary["before_launch_us_spread"] == 1.0


def test_the_report_names_the_machine_and_says_what_was_not_measured() -> None:
    result = {"argv": ["python", "bench/gpu_evidence_cost.py", "--out", "x"],
              "machine": {"host": "box", "cpus": 2, "python": "3.11", "torch": "2.13.0+cpu", "cuda": False},
              "syncs": {"status": "N/A: no CUDA", "cpu_warning_path_us": 3.2},
              "allocator": {"status": "N/A: no CUDA"}, "gpm": {"status": "N/A: no NVML"},
              "kernel_window": {"device": "cpu", "window_s": 4.0, "record_s": 3.0, "rounds": [
                  {"before": _window(100.0, 5.0), "during": _window(120.0, 7.0), "after": _window(101.0, 5.0)}],
                  "summary": {}, "answer": {"seconds": 8.9}}}
    text = bench.markdown(result)
    assert text.startswith("# GPU evidence costs (no GPU; box, 2 CPUs, torch 2.13.0+cpu)")
    assert "syncs probe: N/A: no CUDA" in text and "NVML GPM: N/A: no NVML" in text
    assert "| 0 | 100.0 | 120.0 | 101.0 | 5.0 | 5.0 |" in text and "answered in 8.9 s" in text


def test_the_warning_path_counts_every_warning() -> None:
    assert 0.0 < bench._warning_path_us(2000) < 1000.0
