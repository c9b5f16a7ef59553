"""allocator: rates from the memory_stats() dicts recorded on the H200, and N/A without CUDA."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from probes.allocator import AllocatorProbe, Config

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "h200" / "memory_stats.json"


def test_churn_rates_from_recorded_h200_stats() -> None:
    recorded = json.loads(FIXTURE.read_text())
    frames = [recorded["before"], recorded["after_churn_with_empty_cache"]]
    clock = iter([100.0, 102.0])
    probe = AllocatorProbe(Config(), stats_fn=lambda dev: frames.pop(0), devices=[0], clock=lambda: next(clock))
    first = probe.snapshot(0.0)
    assert first["status"] == "ok" and first["devices"]["0"]["device_alloc_per_s"] == 0.0
    dev = probe.snapshot(0.0)["devices"]["0"]
    assert dev["device_alloc_per_s"] == pytest.approx((38 - 4) / 2)
    assert dev["device_free_per_s"] == pytest.approx(34 / 2)
    assert dev["sync_all_streams_per_s"] == pytest.approx(10 / 2)
    assert dev["num_device_alloc"] == 38 and dev["alloc_retries"] == 0 and dev["ooms"] == 0
    assert dev["reserved_bytes"] == 702545920
    assert dev["reserved_swing_bytes"] == 702545920 - 436207616
    assert 0.0 <= dev["fragmentation_share"] <= 1.0
    assert dev["allocated_bytes_per_s"] == pytest.approx((10693254144 - 3388997632) / 2)  # 50 tensors made, dropped
    assert dev["requested_bytes"] == 33554432 and dev["inactive_splits"] == 0


def test_steady_state_has_no_churn() -> None:
    stats = json.loads(FIXTURE.read_text())["before"]
    clock = iter([1.0, 2.0])
    probe = AllocatorProbe(Config(), stats_fn=lambda dev: stats, clock=lambda: next(clock))
    probe.snapshot(0.0)
    dev = probe.snapshot(0.0)["devices"]["0"]
    assert dev["device_alloc_per_s"] == dev["device_free_per_s"] == dev["reserved_swing_bytes"] == 0


def test_no_cuda_is_na() -> None:
    import torch

    assert not torch.cuda.is_available()
    reading = AllocatorProbe(Config()).snapshot(0.0)
    assert reading == {"status": "na", "reason": "no CUDA"}


def test_empty_stats_are_na() -> None:
    reading = AllocatorProbe(Config(), stats_fn=lambda dev: {}).snapshot(0.0)
    assert reading["status"] == "na"
