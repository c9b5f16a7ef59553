"""GPU memory that grows without bound (analysis/findings/gpu_memory.py): the allocator probe's live tensors board by
board, NVML's reading of the process's memory sweep by sweep, each projected onto what is left (the process's cap
from set_per_process_memory_fraction, or the GPU's free memory); silent on a bounded ring, on an allocator warming up
and levelling off, on slow drift, and on CPU. The payloads have the shape of the probe's (its memory_stats() fields
as recorded on the H200, tests/fixtures/h200/memory_stats.json)."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from findings_builders import (
    NOW_S,
    _ids,
    _one,
    board,
    cuda_facts,
    gpu_sample,
    observation,
    pipeline,
    thread_stats,
)

from dflash_diag.analysis.findings import evaluate
from dflash_diag.model import Finding, Observation, Severity, ThreadState

RULE = "gpu-memory-growth"
GIB = 2**30
THREADS = (thread_stats("train", "other", {ThreadState.GPU_WAIT: 0.6, ThreadState.NATIVE: 0.4}, tid=12, n=60),)


def _boards(allocated: list[float], *, limit: float | None = 16 * GIB, total: float = 141 * GIB) -> list[Any]:
    """One board every 0.5 s with the allocator's per-device reading (live tensors ``allocated``)."""
    out = []
    for i, live in enumerate(allocated):
        dev = {"allocated_bytes": int(live), "reserved_bytes": int(live + 0.3 * GIB), "alloc_retries": 0,
               "alloc_retries_per_s": 0.0, "device_alloc_per_s": 0.0, "device_free_per_s": 0.0,
               "total_bytes": int(total), "limit_bytes": int(limit if limit is not None else total)}
        out.append(board({"allocator": {"devices": {"0": dev}, "empty_cache_calls": 0}},
                         wall_time_s=NOW_S - 5.0 + 0.5 * i, seq=i + 1))
    return out


def _run(obs: Observation, threads: Any = THREADS) -> tuple[Finding, ...]:
    return evaluate(obs, threads, pipeline(), now_wall_s=NOW_S)


def _with_gpus(obs: Observation, own: list[float | None], others: tuple[tuple[int, int], ...] = ()) -> Observation:
    gpus = tuple((gpu_sample(t=float(i), own_bytes=None if b is None else int(b), others=others),)
                 for i, b in enumerate(own))
    return replace(obs, gpus=gpus, process=cuda_facts(age_s=20.0))


def test_live_tensors_growing_every_step_are_a_warning_projected_onto_the_process_cap() -> None:
    """The ranker that keeps every step's scores on the GPU: +250 MB/s of live tensors, a 16 GiB cap."""
    live = [3 * GIB + 250 * 2**20 * 0.5 * i + (8 * 2**20 if i % 2 else 0) for i in range(11)]  # +-8 MB of activations
    obs = _with_gpus(observation(_boards(live)), [4 * GIB] * 5)
    f = _one(_run(obs), RULE)
    assert f.severity == Severity.WARNING
    assert f.claim.startswith("cuda:0: GPU memory grows steadily: live tensors (allocator probe) +250 MB/s")
    assert "its 16.0 GiB cap (set_per_process_memory_fraction) is used up in 48 s (out of memory)" in f.claim
    assert dict(f.evidence)["read from"] == "live tensors (allocator probe)"


def test_from_outside_nvml_reads_the_process_memory_growing_against_the_gpu_free_memory() -> None:
    obs = _with_gpus(observation(), [3 * GIB + 0.25 * GIB * i for i in range(6)])
    f = _one(_run(obs), RULE)
    assert f.severity == Severity.WARNING
    assert "the process's GPU memory (NVML) +256 MB/s, 3.00 -> 4.25 GiB in 5 s" in f.claim
    assert "the GPU's free memory is used up in 9 min" in f.claim  # 141 GiB - 4.25 - 0.6 of context


def test_a_bounded_ring_an_allocator_warming_up_and_a_slow_drift_are_silent() -> None:
    flat = [3 * GIB + (40 * 2**20 if i % 3 == 0 else 0) for i in range(11)]  # a ring of 8 batches: steady
    warming = [3 * GIB + min(i, 4) * 0.4 * GIB for i in range(11)]  # reserves its working set, then levels off
    drift = [3 * GIB + 4 * 2**20 * 0.5 * i for i in range(11)]  # 4 MB/s
    for live in (flat, warming, drift):
        assert RULE not in _ids(_run(_with_gpus(observation(_boards(live)), [4 * GIB] * 5)))
    assert RULE not in _ids(_run(_with_gpus(observation(), [3 * GIB + 0.4 * GIB * min(i, 2) for i in range(6)])))


def test_memory_freed_early_in_the_window_then_taken_again_is_silent() -> None:
    """A healthy EMA twin attached on an H100's host: live tensors fell in the window's earlier half (-518 MB/s) and
    rose in the later (+262 MB/s), 4 of 5 readings rising: it read as steady growth, a false warning."""
    dip = [2.0 * GIB] + [1.2 * GIB + 0.1 * GIB * i for i in range(10)]
    assert RULE not in _ids(_run(_with_gpus(observation(_boards(dip)), [4 * GIB] * 5)))
    assert RULE in _ids(_run(_with_gpus(observation(_boards(dip[1:] + [2.2 * GIB])), [4 * GIB] * 5)))


def test_growth_far_from_running_out_and_growth_while_compiling_are_information() -> None:
    slow = [3 * GIB + 20 * 2**20 * 0.5 * i for i in range(11)]  # 20 MB/s, 120 GiB left: hours
    f = _one(_run(_with_gpus(observation(_boards(slow, limit=None)), [4 * GIB] * 5)), RULE)
    assert f.severity == Severity.INFO and "used up in 117 min" in f.claim
    fast = [3 * GIB + 250 * 2**20 * 0.5 * i for i in range(11)]
    compiling = (thread_stats("train", "other", {ThreadState.COMPILE: 0.6, ThreadState.NATIVE: 0.4}, tid=12, n=60),)
    f = _one(_run(_with_gpus(observation(_boards(fast)), [4 * GIB] * 5), compiling), RULE)
    assert f.severity == Severity.INFO and "a thread is compiling" in f.claim


def test_another_process_on_the_gpu_and_a_cpu_process_are_not_read_as_ours() -> None:
    growing = [3 * GIB + 0.25 * GIB * i for i in range(6)]
    # NVML does not name this process (a container's PID namespace) and another one shares the GPU: not ours to read.
    shared = _with_gpus(observation(), [None] * 6, others=((5151, 8 * GIB), (5152, 2 * GIB)))
    assert RULE not in _ids(_run(shared))
    cpu = replace(_with_gpus(observation(), growing), process=replace(cuda_facts(), uses_cuda=False))
    assert RULE not in _ids(_run(cpu))
    assert math.isclose(growing[-1] - growing[0], 1.25 * GIB)
