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


def test_the_device_memory_and_the_process_cap_are_published() -> None:
    """gpu-memory-growth projects growth onto what the process may use: a 16 GiB cap set with
    set_per_process_memory_fraction on a 141 GiB device; where nothing can be read, None."""
    stats = json.loads(FIXTURE.read_text())["before"]
    capped = AllocatorProbe(Config(), stats_fn=lambda dev: stats, devices=[0],
                            limits_fn=lambda dev: (141 * 2**30, 16 * 2**30)).snapshot(0.0)["devices"]["0"]
    assert (capped["total_bytes"], capped["limit_bytes"]) == (141 * 2**30, 16 * 2**30)
    unknown = AllocatorProbe(Config(), stats_fn=lambda dev: stats, devices=[0]).snapshot(0.0)["devices"]["0"]
    assert unknown["total_bytes"] is None and unknown["limit_bytes"] is None  # torch cannot read a CPU-only box's


def test_no_cuda_is_na() -> None:
    import torch

    assert not torch.cuda.is_available()
    reading = AllocatorProbe(Config()).snapshot(0.0)
    assert reading == {"status": "na", "reason": "no CUDA"}


def test_empty_stats_are_na() -> None:
    reading = AllocatorProbe(Config(), stats_fn=lambda dev: {}).snapshot(0.0)
    assert reading["status"] == "na"


def test_vocabulary_projections_are_found_in_a_short_window_then_the_hook_leaves() -> None:
    """A target thread projects onto a 40,000-token vocabulary under no_grad; the watch's window records the call
    (the program's line, the thread, the output's shape and bytes, grad off) and nothing smaller; after the window
    no global hook is left."""
    import threading

    import torch
    from torch import nn
    from torch.nn.modules import module as module_mod

    from probes._vocab import VocabWatch

    backbone, lm_head = nn.Linear(64, 64), nn.Linear(64, 40_000, bias=False)
    watch = VocabWatch(window_s=0.5, every_s=60.0)
    watch.tick(torch, now_s=100.0)
    assert len(module_mod._global_forward_hooks) == 1

    def target() -> None:
        with torch.no_grad():
            for _ in range(3):
                hidden = backbone(torch.randn(2, 8, 64))
                logits = lm_head(hidden)  # the line the watch names
                del logits

    worker = threading.Thread(target=target, name="tgt-worker")
    worker.start()
    worker.join()
    watch.tick(torch, now_s=100.6)  # the window has lasted: closed
    assert len(module_mod._global_forward_hooks) == 0
    (row,) = watch.rows()
    assert row["site"].startswith("probes/test_allocator.py:") and row["thread"] == "tgt-worker"
    assert row["calls"] == 3 and row["shape"] == [2, 8, 40_000] and row["output_bytes"] == 2 * 8 * 40_000 * 4
    assert row["grad"] is False and watch.guard.errors == 0
    watch.tick(torch, now_s=130.0)  # not due again before every_s
    assert len(module_mod._global_forward_hooks) == 0


def test_the_window_changes_nothing_a_compiled_module_does() -> None:
    """A compiled module run while the window is open: no recompile, and torch's warning about global hooks is not
    shown (the program's output is the same)."""
    import warnings

    import torch
    from torch import nn
    from torch._dynamo.utils import counters

    from probes._vocab import VocabWatch

    torch._dynamo.reset()
    compiled = torch.compile(nn.Sequential(nn.Linear(8, 8), nn.ReLU()))
    x = torch.randn(2, 8)
    compiled(x)
    frames = dict(counters["frames"])
    watch = VocabWatch(window_s=0.5, every_s=60.0)
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        watch.tick(torch, now_s=0.0)
        compiled(x)
        watch.tick(torch, now_s=1.0)
    assert dict(counters["frames"]) == frames
    assert not [w for w in shown if "global hooks" in str(w.message)]
