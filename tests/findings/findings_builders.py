"""Builders of constructed Observations, boards and aggregates for the pure rule tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dflash_diag.analysis.findings import evaluate
from dflash_diag.model import (
    NA,
    Board,
    Finding,
    Frame,
    Observation,
    PipelineView,
    StackSample,
    StageNames,
    StageStats,
    ThreadSample,
    ThreadState,
    ThreadStats,
    WriterIdentity,
)

NOW_S = 1_764_412_345.0


def board(
    probes: Mapping[str, Mapping[str, Any]] | None = None,
    app: Mapping[str, Any] | None = None,
    *,
    wall_time_s: float = NOW_S,
    seq: int = 10,
    torch: str = "2.13.0+cpu",
) -> Board:
    return Board(
        schema="dflash-diag.board/1",
        writer=WriterIdentity(pid=4242, start_time_ticks=1, argv=("python", "train.py"), python="3.11.7",
                           torch=torch, hostname="box"),
        seq=seq,
        wall_time_s=wall_time_s,
        interval_s=0.5,
        threads={},
        probes={name: {"status": "ok", **payload} for name, payload in (probes or {}).items()},
        app=dict(app or {}),
        path="/tmp/x/4242.json",
    )


def thread_stats(
    name: str,
    stage: str,
    shares: Mapping[ThreadState, float],
    *,
    tid: int | None = None,
    gil_held_pct: float = 0.0,
    n: int = 20,
    timeline: Sequence[ThreadState] | None = None,
) -> ThreadStats:
    return ThreadStats(
        name=name,
        os_thread_id=tid,
        stage=stage,
        n_samples=n,
        shares=dict(shares),
        cpu_pct=50.0,
        gil_held_pct=gil_held_pct,
        top_frame=Frame("step", "/app/train.py", 10),
        gpu_index=None,
        timeline=tuple(timeline or ()),
    )


_NO_PROBE = NA("no queue probe")
# The reference trainer's words: its threads are called target-N and drafter-N.
TRAINER_WORDS = StageNames(own_words=True)


def stage(name: str, shares: Mapping[ThreadState, float] | None = None, bps: float | NA = _NO_PROBE) -> StageStats:
    return StageStats(stage=name, threads=(), batches_per_s=bps, tokens_per_s=NA("no board"), shares=dict(shares or {}))


def pipeline(
    *,
    bottleneck: str = "unknown",
    producer: float | NA = _NO_PROBE,
    consumer: float | NA = _NO_PROBE,
    trend: float | NA = _NO_PROBE,
    target_shares: Mapping[ThreadState, float] | None = None,
    drafter_shares: Mapping[ThreadState, float] | None = None,
    names: StageNames = TRAINER_WORDS,
) -> PipelineView:
    return PipelineView(
        target=stage("target", target_shares),
        drafter=stage("drafter", drafter_shares),
        queue_name="q_hs",
        queue_depth=NA("no queue probe"),
        queue_maxsize=NA("no queue probe"),
        queue_depth_history=(),
        queue_trend_per_s=trend,
        producer_starved_share=producer,
        consumer_starved_share=consumer,
        bottleneck=bottleneck,
        verdict="",
        names=names,
    )


def thread_sample(name: str, frames: Sequence[Frame], *, tid: int, gil: bool = False, active: bool = True) -> ThreadSample:
    return ThreadSample(thread_id=tid * 10, os_thread_id=tid, name=name, active=active, owns_gil=gil, frames=tuple(frames))


def stack(threads: Sequence[ThreadSample], *, t: float = 0.0, native: bool = False) -> StackSample:
    return StackSample(pid=4242, monotonic_s=t, wall_s=NOW_S + t, duration_s=0.01, native=native, threads=tuple(threads))


def observation(
    boards: Sequence[Board] | NA = (),
    stacks: Sequence[StackSample] = (),
    *,
    alive: bool = True,
) -> Observation:
    return Observation(
        pid=4242,
        cmdline=("python", "train.py"),
        started_wall_s=NOW_S - 3.0,
        window_s=3.0,
        stacks=tuple(stacks),
        proc=(),
        gpus=NA("no NVML"),
        boards=tuple(boards) if not isinstance(boards, NA) else boards,
        process_alive=alive,
        warnings=(),
    )


HEALTHY_PROBES: dict[str, dict[str, Any]] = {
    "gil": {"free_threaded": False, "contention_share": 0.05, "wait_mean_ms": 0.4, "wait_p99_ms": 2.0},
    "allocator": {"devices": {"0": {"device_alloc_per_s": 0.0, "device_free_per_s": 0.0, "alloc_retries": 0,
                                    "alloc_retries_per_s": 0.0, "fragmentation_share": 0.05,
                                    "inactive_split_bytes": 10, "empty_cache_calls": 0, "reserved_bytes": 2**33}}},
    "compile": {"compiles": 3, "recompiles": 1, "graph_breaks": 0, "recompile_limit_hits": 0, "compile_time_s": 5.0,
                "compiling_now": False, "by_thread": {"drafter-0": {"compiles": 3, "recompiles": 1}}},
    "cudagraphs": {"torch": "2.13.0", "captures": 2, "replays": 100, "skips": 0, "rerecords": 0, "skip_reasons": [],
                   "capture_threads": ["drafter-0"], "multi_thread_hazard": None},
    "queues": {"q_hs": {"depth": 2, "maxsize": 8, "put_blocked_share": 0.05, "get_blocked_share": 0.05}},
    "checkpoint": {"calls": {"reentrant": 0, "non_reentrant": 96}, "sites": [], "grad_none_params": [],
                   "grad_none_count": 0, "trainable_params": 58, "checked_backward_steps": 3},
    "fastpath": {"fla_importable": True, "gdn_kernels": {"chunk_gated_delta_rule": "fla"}, "gdn_fast_path": True,
                 "flex_attention": "compiled", "fallback_warnings": []},
    "codedrift": {"checked_modules": 900, "stale": [], "check_cost_ms": 3.0},
}
HEALTHY_APP: dict[str, Any] = {
    "name": "reference_trainer", "step": 100, "tokens_per_s": 21500.0,
    "config": {"device": "cuda", "vocab_size": 248320},
    "threads": {"target-0": {"role": "target", "device": "cuda:0"}, "drafter-0": {"role": "drafter", "device": "cuda:1"}},
}
HEALTHY_THREADS = (
    thread_stats("target-0", "target", {ThreadState.NATIVE: 0.6, ThreadState.PYTHON: 0.3, ThreadState.QUEUE_PUT: 0.1},
                 tid=11, gil_held_pct=30.0),
    thread_stats("drafter-0", "drafter", {ThreadState.NATIVE: 0.7, ThreadState.PYTHON: 0.25, ThreadState.GIL_WAIT: 0.05},
                 tid=12, gil_held_pct=25.0),
)


def healthy_board(**overrides: Any) -> Board:
    probes = {k: dict(v) for k, v in HEALTHY_PROBES.items()}
    for name, payload in overrides.items():
        probes[name] = {**probes.get(name, {}), **payload}
    return board(probes, HEALTHY_APP)


# --- running the rules (the per-family tests, test_rules_*.py) ---------------------------------------------


def _run(boards: Any = None, threads: Any = HEALTHY_THREADS, pipe: Any = None, stacks: Any = (), alive: bool = True,
         now: float = NOW_S) -> tuple[Finding, ...]:
    obs = observation(boards if boards is not None else (healthy_board(),), stacks, alive=alive)
    return evaluate(obs, threads, pipe or pipeline(), now_wall_s=now)


def _ids(findings: tuple[Finding, ...]) -> set[str]:
    return {f.rule_id for f in findings}


def _one(findings: tuple[Finding, ...], rule_id: str) -> Finding:
    matching = [f for f in findings if f.rule_id == rule_id]
    assert len(matching) == 1, f"{rule_id} not raised exactly once: {[f.rule_id for f in findings]}"
    finding = matching[0]
    assert finding.claim and finding.remedy and finding.evidence
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in finding.evidence)
    return finding


# --- GPU readings (NVML, NVML GPM) and the outside facts of a CUDA process ----------------------------------


def gpu_sample(*, t: float = 0.0, util: float = 99.0, index: int = 0, own_bytes: int | None = 4 * 2**30,
               others: Sequence[tuple[int, int]] = (), total_bytes: int = 141 * 2**30, pid: int = 4242) -> Any:
    """One NVML reading of an H200 the process runs on (``own_bytes`` its memory, None: NVML cannot say), with other
    processes ``(pid, bytes)`` beside it."""
    from dflash_diag.model import GpuProcess, GpuSample

    na = NA("not read")
    procs = tuple(GpuProcess(pid=p, used_memory_bytes=b, sm_util_pct=na) for p, b in others)
    if own_bytes is not None:
        procs = (GpuProcess(pid=pid, used_memory_bytes=own_bytes, sm_util_pct=na), *procs)
    used = (own_bytes or 0) + sum(b for _, b in others) + 600 * 2**20
    return GpuSample(index=index, name="NVIDIA H200", uuid=f"GPU-{index}", util_pct=util, mem_util_pct=na,
                     memory_used_bytes=used, memory_total_bytes=total_bytes, power_w=300.0, power_limit_w=700.0,
                     sm_clock_mhz=1980, max_sm_clock_mhz=1980, temperature_c=50, throttle_reasons=(),
                     processes=procs, monotonic_s=t)


def gpm_reading(*, fp32: float, tensor: float, sm: float = 95.0, index: int = 0, window_s: float = 5.0) -> Any:
    from dflash_diag.model import GpmReading

    return GpmReading(index=index, window_s=window_s, sm_util_pct=sm, sm_occupancy_pct=14.0, any_tensor_pct=tensor,
                      hmma_tensor_pct=tensor, fp32_pct=fp32, fp16_pct=0.0, dram_bw_pct=16.0)


def cuda_facts(*, age_s: float = 120.0, stderr: str | None = None) -> Any:
    """The outside facts of a running process that has the CUDA driver mapped, started ``age_s`` before NOW_S."""
    from dflash_diag.model.evidence import ProcessFacts

    return ProcessFacts(state="S", start_wall_s=NOW_S - age_s, stderr_target="pipe:[1]", stderr_tail=stderr,
                        uses_cuda=True)
