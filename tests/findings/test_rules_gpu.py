"""The GPU family (analysis/findings/gpu.py): a GPU left idle, and by whom."""

from __future__ import annotations

from typing import Any

from findings_builders import (
    HEALTHY_APP,
    HEALTHY_PROBES,
    HEALTHY_THREADS,
    NOW_S,
    _ids,
    _one,
    board,
    observation,
    pipeline,
    thread_stats,
)

from dflash_diag.analysis.findings import evaluate
from dflash_diag.model import NA, ThreadState


def _gpu_obs(util: float, threads_app: dict[str, Any]) -> Any:
    import dataclasses

    from dflash_diag.model import GpuSample

    def sample(i: int) -> GpuSample:
        return GpuSample(index=1, name="NVIDIA H200", uuid="GPU-1", util_pct=util, mem_util_pct=NA("x"),
                         memory_used_bytes=NA("x"), memory_total_bytes=NA("x"), power_w=NA("x"), power_limit_w=NA("x"),
                         sm_clock_mhz=NA("x"), max_sm_clock_mhz=NA("x"), temperature_c=NA("x"), throttle_reasons=(),
                         processes=(), monotonic_s=float(i))

    b = board(HEALTHY_PROBES, {**HEALTHY_APP, "threads": threads_app})
    return dataclasses.replace(observation((b,)), gpus=tuple((sample(i),) for i in range(5)))


def test_gpu_underused_by_gil_bound_drafter() -> None:
    obs = _gpu_obs(22.0, {"drafter-0": {"role": "drafter", "device": "cuda:1"}})
    threads = (thread_stats("drafter-0", "drafter", {ThreadState.GIL_WAIT: 0.5, ThreadState.PYTHON: 0.4,
                                                     ThreadState.NATIVE: 0.1}, tid=12),)
    f = _one(evaluate(obs, threads, pipeline(), now_wall_s=NOW_S), "gpu-underused")
    assert "cuda:1 is busy only 22% of the time while the threads that drive it (drafter-0)" in f.claim
    assert "GIL wait 50%" in dict(f.evidence)["their time"]


def test_gpu_underused_alone_is_information_and_a_linked_cause_makes_the_headline_a_warning() -> None:
    """Low utilisation is what a small healthy model shows too (the casebook's healthy twins on the H200 and an
    H100: 15-42% busy): no measured cost on its own. A cause that explains it carries the cost and the severity."""
    from dflash_diag.analysis.causal import link
    from dflash_diag.model import Finding, Severity
    from dflash_diag.model.findings import CAUSE

    obs = _gpu_obs(22.0, {"drafter-0": {"role": "drafter", "device": "cuda:1"}})
    threads = (thread_stats("drafter-0", "drafter", {ThreadState.NATIVE: 0.9, ThreadState.PYTHON: 0.1}, tid=12),)
    alone = _one(evaluate(obs, threads, pipeline(), now_wall_s=NOW_S), "gpu-underused")
    assert alone.severity == Severity.INFO
    _, headline, _ = link([alone])
    assert headline is not None and headline.rule_id == "gpu-underused" and headline.severity == Severity.INFO
    sync = Finding(rule_id="host-sync-storm", severity=Severity.WARNING, claim="drafter-0 waits on the GPU in "
                   ".item() 40% of the time", evidence=(), remedy="r", impact=0.4, kind=CAUSE, stages=("drafter",))
    _, headline, _ = link([alone, sync])
    assert headline is not None and headline.rule_id == "gpu-underused" and headline.because == ("host-sync-storm",)
    assert headline.severity == Severity.WARNING


def test_gpu_idle_because_of_the_queue_is_the_pipeline_rule() -> None:
    obs = _gpu_obs(22.0, {"drafter-0": {"role": "drafter", "device": "cuda:1"}})
    threads = (thread_stats("drafter-0", "drafter", {ThreadState.QUEUE_GET: 0.7, ThreadState.NATIVE: 0.3}, tid=12),)
    assert "gpu-underused" not in _ids(evaluate(obs, threads, pipeline(), now_wall_s=NOW_S))


def test_busy_gpu_raises_nothing() -> None:
    obs = _gpu_obs(95.0, {"drafter-0": {"role": "drafter", "device": "cuda:1"}})
    assert evaluate(obs, HEALTHY_THREADS, pipeline(), now_wall_s=NOW_S) == ()
