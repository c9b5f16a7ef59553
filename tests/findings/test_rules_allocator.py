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


# --- from outside: NVML's reading of the process's GPU memory ----------------------------------------------------

GIB = 1024**3


def _outside(own: list[float], stacks: Any = ()) -> Any:
    """No probe board; NVML reads the process's memory once a second (a CUDA process, 2 minutes old)."""
    from dataclasses import replace

    from findings_builders import cuda_facts, gpu_sample, observation

    gpus = tuple((gpu_sample(t=float(i), own_bytes=int(b)),) for i, b in enumerate(own))
    return replace(observation((), stacks), gpus=gpus, process=cuda_facts())


def _outside_ids(own: list[float], stacks: Any = ()) -> dict[str, Any]:
    from findings_builders import HEALTHY_THREADS, pipeline

    from dflash_diag.analysis.findings import evaluate

    return {f.rule_id: f for f in evaluate(_outside(own, stacks), HEALTHY_THREADS, pipeline(), now_wall_s=NOW_S)}


def test_from_outside_a_cache_freed_again_and_again_near_a_cap_is_alloc_retries() -> None:
    """The 6 GiB-capped program of varying batch lengths: its memory falls by gigabytes and grows back."""
    f = _outside_ids([5.9 * GIB, 3.1 * GIB, 5.8 * GIB, 5.9 * GIB, 2.7 * GIB, 5.6 * GIB])["alloc-retries"]
    assert f.severity.name == "WARNING"
    assert f.claim.startswith("cuda:0: the process's GPU memory fell 2 time(s) in 5 s by up to 3.2 GiB and grew back")
    assert "an allocation fails and is retried" in f.claim
    assert dict(f.evidence)["falls"] == "2 of >= 1.2 GiB"


def test_from_outside_steady_memory_one_release_and_empty_cache_are_not_retries() -> None:
    assert "alloc-retries" not in _outside_ids([5.9 * GIB] * 6)  # the twin: padded, one set of sizes
    assert "alloc-retries" not in _outside_ids([5.9 * GIB, 5.9 * GIB, 2.0 * GIB, 2.0 * GIB, 2.1 * GIB])  # a phase ended
    assert "alloc-retries" not in _outside_ids([5.0 * GIB, 4.8 * GIB, 5.1 * GIB, 4.9 * GIB, 5.0 * GIB])  # step noise
    frames = (Frame("empty_cache", "/sp/torch/cuda/memory.py", 200), Frame("train_step", "/app/train.py", 77))
    stacks = [stack([thread_sample("trainer", frames, tid=7)], t=0.1)]
    found = _outside_ids([5.9 * GIB, 3.1 * GIB, 5.8 * GIB, 5.9 * GIB, 2.7 * GIB, 5.6 * GIB], stacks)
    assert "alloc-empty-cache" in found and "alloc-retries" not in found  # empty_cache() freed it, seen in the stacks
