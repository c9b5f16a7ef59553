"""The allocator family (analysis/findings/allocator.py): churn, retries, fragmentation, empty_cache in the loop."""

from __future__ import annotations

from typing import Any

from findings_builders import (
    HEALTHY_APP,
    HEALTHY_PROBES,
    NOW_S,
    _one,
    _run,
    board,
    healthy_board,
    stack,
    thread_sample,
)

from dflash_diag.model import Frame


def _alloc(**stats: Any) -> Any:
    return healthy_board(allocator={"devices": {"0": {**HEALTHY_PROBES["allocator"]["devices"]["0"], **stats}}})


def test_alloc_churn() -> None:
    f = _one(_run(boards=(_alloc(device_alloc_per_s=40.0, device_free_per_s=38.0),)), "alloc-churn")
    assert "78 times/s" in f.claim


def test_alloc_retries() -> None:
    assert _one(_run(boards=(_alloc(alloc_retries=5, alloc_retries_per_s=0.5),)), "alloc-retries")


def test_alloc_fragmentation() -> None:
    assert _one(_run(boards=(_alloc(fragmentation_share=0.6, inactive_split_bytes=4 * 1024**3),)), "alloc-fragmentation")


def test_empty_cache_seen_in_stacks() -> None:
    frames = (Frame("empty_cache", "/sp/torch/cuda/memory.py", 200), Frame("train_step", "/app/train.py", 77))
    stacks = [stack([thread_sample("drafter-0", frames, tid=12)])]
    f = _one(_run(stacks=stacks), "alloc-empty-cache")
    assert dict(f.evidence)["seen in drafter-0"] == "train.py:77"


def test_empty_cache_calls_counted_by_probe() -> None:
    first = _alloc(empty_cache_calls=3)
    last = board({**HEALTHY_PROBES, "allocator": {"devices": {"0": {**HEALTHY_PROBES["allocator"]["devices"]["0"],
                                                                     "empty_cache_calls": 9}}}},
                 HEALTHY_APP, wall_time_s=NOW_S + 2)
    assert _one(_run(boards=(first, last), now=NOW_S + 2), "alloc-empty-cache")
