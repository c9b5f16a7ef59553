"""The findings doctor draws from a torch.profiler trace of the process (analysis/findings/kernels.py): launch-bound
GPUs named with their launching thread, GPU-bound steps left alone, host syncs, CPU-only traces, old traces; and the
trace's line in gpu-underused's evidence. Traces are generated in torch's own export format (tests/kernel_traces.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from findings_builders import HEALTHY_APP, HEALTHY_PROBES, NOW_S, board, observation, pipeline, thread_stats
from kernel_traces import A, TorchTrace, launch_loop

from dflash_diag.analysis.causal import link
from dflash_diag.analysis.findings import evaluate
from dflash_diag.analysis.kernels import summarise
from dflash_diag.model import NA, Finding, Observation, Severity, ThreadState, ThreadStats
from dflash_diag.model.kernels import LAUNCH_BOUND
from dflash_diag.sources.kernel_trace import parse_trace


def _threads(tid: int = A) -> tuple[ThreadStats, ...]:
    return (thread_stats("drafter-0", "drafter", {ThreadState.PYTHON: 0.6, ThreadState.NATIVE: 0.4}, tid=tid, n=40),)


def _observation(trace: TorchTrace) -> Observation:
    return replace(observation(), kernels=parse_trace(trace.data(), source="trace.json"))


def _findings(trace: TorchTrace | Observation, threads: tuple[ThreadStats, ...] = ()) -> tuple[Finding, ...]:
    obs = trace if isinstance(trace, Observation) else _observation(trace)
    return evaluate(obs, threads or _threads(), pipeline(), now_wall_s=NOW_S)

def test_a_launch_bound_loop_is_a_warning_that_names_the_launching_thread() -> None:
    # 100 us kernels, each launched 60 us after the previous one ended: the GPU idles 60 of every 160 us.
    trace = launch_loop(steps=6, kernels_per_step=100, kernel_us=100.0, host_gap_us=60.0, ahead=False)
    s = summarise(parse_trace(trace.data(), source="t"))
    assert s.steps == 6 and s.devices[0].share(LAUNCH_BOUND) == pytest.approx(60 / 160, abs=0.01)
    (f,) = [f for f in _findings(trace) if f.rule_id == "gpu-launch-bound"]
    assert f.severity == Severity.WARNING and f.stages == ("drafter",)
    assert f.claim.startswith("cuda:0 is idle 38% of the step (6 steps traced) between kernels launched by drafter-0: "
                              "launch-bound")
    evidence = dict(f.evidence)
    assert evidence["launch-bound by thread"] == "drafter-0 38%"
    assert "busy 62%" in evidence["GPU"] and "gemm_kernel 100%" in evidence["top kernels"]
    assert f.impact == pytest.approx(0.375, abs=0.01)


def test_launchers_starved_by_their_queue_are_not_called_slow_to_launch() -> None:
    trace = launch_loop(steps=6, kernels_per_step=100, kernel_us=100.0, host_gap_us=60.0, ahead=False)
    waiting = (thread_stats("drafter-0", "drafter", {ThreadState.QUEUE_GET: 0.6, ThreadState.NATIVE: 0.4}, tid=A, n=40),)
    (f,) = [f for f in _findings(trace, waiting) if f.rule_id == "gpu-launch-bound"]
    assert f.severity == Severity.INFO and "wait on a queue or idle 60% of the sampled time" in f.claim


def test_a_gpu_bound_loop_gets_no_launch_bound_finding_only_the_note() -> None:
    trace = launch_loop(steps=6, kernels_per_step=100, kernel_us=100.0, host_gap_us=60.0, ahead=True)
    found = _findings(trace)
    assert "gpu-launch-bound" not in {f.rule_id for f in found}
    (note,) = [f for f in found if f.rule_id == "kernel-trace"]
    assert note.severity == Severity.INFO and "ran GPU work 100% of the step" in note.claim
    assert "forward 100%" in note.claim


def test_small_gaps_and_short_traces_make_no_verdict() -> None:
    few = launch_loop(steps=1, kernels_per_step=10, kernel_us=100.0, host_gap_us=60.0, ahead=False)
    assert "gpu-launch-bound" not in {f.rule_id for f in _findings(few)}  # 10 kernels: not a training step's trace
    slight = launch_loop(steps=6, kernels_per_step=100, kernel_us=1000.0, host_gap_us=20.0, ahead=False)
    assert "gpu-launch-bound" not in {f.rule_id for f in _findings(slight)}  # 2%: launch latency, healthy


def test_after_sync_gaps_say_so_in_the_claim_and_the_fix() -> None:
    t = TorchTrace().thread(A, "drafter-0")
    now, corr = 0.0, 1
    for _ in range(200):  # a kernel, then the thread waits for it (.item()) and launches the next 80 us later
        t.op(A, "aten::mm", now, now + 15).launch(A, now + 2, corr).gpu("gemm", now + 20, now + 220, corr)
        t.op(A, "aten::item", now + 16, now + 225).launch(A, now + 18, 10_000 + corr, name="cudaStreamSynchronize",
                                                            dur=205)
        now += 300
        corr += 1
    (f,) = [f for f in _findings(t) if f.rule_id == "gpu-launch-bound"]
    assert "right after a host sync" in f.claim and "keep values on the device" in f.remedy


def test_a_cpu_only_trace_is_a_note_and_no_verdict() -> None:
    t = TorchTrace().thread(A, "drafter-0").op(A, "aten::mm", 0, 50).op(A, "aten::relu", 60, 70)
    found = _findings(t)
    assert [f.rule_id for f in found if f.rule_id in ("gpu-launch-bound", "kernel-trace")] == ["kernel-trace"]
    assert "holds no GPU work" in next(f.claim for f in found if f.rule_id == "kernel-trace")


def test_an_old_trace_says_it_may_not_describe_the_process_now() -> None:
    trace = launch_loop(steps=6, kernels_per_step=100, kernel_us=100.0, host_gap_us=60.0, ahead=False)
    obs = _observation(trace)
    assert obs.kernels is not None
    obs = replace(obs, kernels=replace(obs.kernels, started_wall_s=NOW_S - 3600))
    (f,) = [f for f in _findings(obs) if f.rule_id == "gpu-launch-bound"]
    assert "taken 60 min ago: it may not describe the process as it runs now" in dict(f.evidence)["kernel trace"]




def test_gpu_underused_carries_the_trace_and_is_explained_by_the_launch_bound_cause() -> None:
    from dflash_diag.model import GpuSample

    def sample(i: int) -> GpuSample:
        na = NA("x")
        return GpuSample(index=0, name="NVIDIA H200", uuid="GPU-0", util_pct=30.0, mem_util_pct=na,
                         memory_used_bytes=na, memory_total_bytes=na, power_w=na, power_limit_w=na, sm_clock_mhz=na,
                         max_sm_clock_mhz=na, temperature_c=na, throttle_reasons=(), processes=(), monotonic_s=float(i))

    app = {**HEALTHY_APP, "threads": {"drafter-0": {"role": "drafter", "device": "cuda:0"}}}
    trace = launch_loop(steps=6, kernels_per_step=100, kernel_us=100.0, host_gap_us=60.0, ahead=False)
    obs = replace(observation((board(HEALTHY_PROBES, app),)), gpus=tuple((sample(i),) for i in range(5)),
                  kernels=parse_trace(trace.data(), source="trace.json"))
    linked, _, _ = link(_findings(obs))
    under = next(f for f in linked if f.rule_id == "gpu-underused")
    assert dict(under.evidence)["kernel trace"] == ("cuda:0 idle 38% of the step (6 steps traced): launch-bound 38%, "
                                                    "after host syncs 0% (launched by drafter-0)")
    assert "gpu-launch-bound" in under.because
