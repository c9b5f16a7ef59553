"""fp32 matmuls off the tensor cores (analysis/findings/precision.py): NVML GPM's FP32 vs tensor pipes over the window
(read from outside), a kernel trace's matmul kernels by how they ran (the real H200 trace of the reference trainer,
and a handmade one), the settings probe's flags and the call that set them; silent where the tensor cores work, where
TF32 is allowed, on a GPU another process shares, and on CPU. The GPM shapes are the readings taken on the H200 by
hand (a bf16 matmul load: SM 94.9, tensor 92.1, FP32 0.0; a TF32-off fp32 load: FP32 69.2, tensor 5.8)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from findings_builders import (
    NOW_S,
    _ids,
    _one,
    board,
    cuda_facts,
    gpm_reading,
    gpu_sample,
    observation,
    pipeline,
    thread_stats,
)
from kernel_traces import A, TorchTrace

from dflash_diag.analysis.causal import link
from dflash_diag.analysis.findings import evaluate
from dflash_diag.model import Finding, Observation, Severity, ThreadState
from dflash_diag.sources.kernel_trace import parse_trace, read_trace_file

RULE = "fp32-matmul-no-tensor-cores"
H200_TRACE = Path(__file__).resolve().parents[1] / "fixtures" / "h200" / "kernels-qwen3.5-4b.json"
THREADS = (thread_stats("optimize", "drafter", {ThreadState.GPU_WAIT: 0.7, ThreadState.NATIVE: 0.3}, tid=12, n=60),
           thread_stats("patch-sampler", "target", {ThreadState.QUEUE_PUT: 0.9, ThreadState.NATIVE: 0.1}, tid=11,
                        n=60))
SETTINGS_HIGHEST = {"torch_flags": {"float32_matmul_precision": "highest", "cuda_matmul_allow_tf32": False},
                    "setting_calls": [{"call_name": "torch.set_float32_matmul_precision", "arg": "'highest'",
                                       "site": "repro.py:17 (make_deterministic)", "count": 1,
                                       "callers": ["MainThread"]}]}


def _obs(gpm: Any = None, *, others: tuple[tuple[int, int], ...] = (), probes: dict[str, Any] | None = None,
         cuda: bool = True) -> Observation:
    boards = (board(probes),) if probes is not None else ()
    base = observation(boards)
    facts = cuda_facts() if cuda else replace(cuda_facts(), uses_cuda=False)
    gpus = tuple((gpu_sample(t=float(i), others=others),) for i in range(5))
    return replace(base, gpus=gpus, gpm=(gpm,) if gpm is not None else (), process=facts)


def _run(obs: Observation, pipe: Any = None) -> tuple[Finding, ...]:
    return evaluate(obs, THREADS, pipe or pipeline(), now_wall_s=NOW_S)


def test_fp32_pipes_busy_while_the_tensor_cores_idle_is_a_warning_with_the_readings() -> None:
    f = _one(_run(_obs(gpm_reading(fp32=69.2, tensor=5.8, sm=95.0))), RULE)
    assert f.severity == Severity.WARNING and f.stages == ()
    assert "cuda:0 runs its float32 matmuls on the FP32 pipes, not the tensor cores" in f.claim
    assert "FP32 pipes were busy 69% and its tensor cores 6%" in f.claim
    ev = dict(f.evidence)
    assert ev["FP32 pipes busy"].startswith("69% of the window (NVML GPM") and ev["tensor pipes busy"] == "6%"
    assert 0.3 <= f.impact <= 0.5
    assert "autocast" in f.remedy and "set_float32_matmul_precision('high')" in f.remedy


def test_the_settings_probe_names_the_setting_and_the_call_that_set_it() -> None:
    f = _one(_run(_obs(gpm_reading(fp32=69.2, tensor=5.8), probes={"settings": SETTINGS_HIGHEST})), RULE)
    assert "float32 matmul precision 'highest' and TF32 off" in f.claim
    assert dict(f.evidence)["set by"] == ("torch.set_float32_matmul_precision('highest') by MainThread at "
                                          "repro.py:17 (make_deterministic)")


def test_some_fp32_matmul_work_is_information() -> None:
    f = _one(_run(_obs(gpm_reading(fp32=25.0, tensor=3.0, sm=80.0))), RULE)
    assert f.severity == Severity.INFO and f.impact > 0


def test_tensor_cores_at_work_tf32_allowed_a_shared_gpu_an_idle_gpu_and_a_cpu_process_are_silent() -> None:
    bf16 = gpm_reading(fp32=0.0, tensor=92.1, sm=94.9)  # the bf16 matmul load on the H200
    mixed = gpm_reading(fp32=30.0, tensor=40.0)  # bf16 matmuls with fp32 elementwise work beside them
    fp32 = gpm_reading(fp32=69.2, tensor=5.8)
    assert RULE not in _ids(_run(_obs(bf16)))
    assert RULE not in _ids(_run(_obs(mixed)))
    tf32 = {"settings": {"torch_flags": {"float32_matmul_precision": "high", "cuda_matmul_allow_tf32": False}}}
    assert RULE not in _ids(_run(_obs(fp32, probes=tf32)))  # fp32 matmuls run as TF32: the FP32 work is not them
    assert RULE not in _ids(_run(_obs(fp32, others=((5151, 20 * 2**30),))))  # GPM is device-wide: not ours alone
    assert RULE not in _ids(_run(_obs(gpm_reading(fp32=69.2, tensor=5.8, sm=30.0))))  # waits on its host
    assert RULE not in _ids(_run(_obs(fp32, cuda=False)))
    assert RULE not in _ids(_run(_obs(None)))  # no GPM (not Hopper, no NVML): nothing to say


def test_the_real_h200_trace_of_the_reference_trainer_is_information_about_its_fp32_region() -> None:
    """Its bf16 step with transformers' fp32 GatedDeltaNet fallback: 22% of the kernel time in fp32 (ffma) matmuls,
    a deliberate fp32 region, not most of the GPU's work: information, with the kernels named."""
    obs = replace(_obs(None), kernels=read_trace_file(H200_TRACE))
    f = _one(_run(obs), RULE)
    assert f.severity == Severity.INFO
    ev = dict(f.evidence)
    assert ev["fp32 matmuls (FP32 pipes)"].startswith("22% of the kernel time")
    assert ev["matmuls on the tensor cores"] == "20% of the kernel time"
    assert ev["fp32 matmul kernel"].startswith("sm80_xmma_gemm_f32f32_f32f32_f32_")


def _fp32_step(name: str, steps: int = 20) -> TorchTrace:
    t = TorchTrace().thread(A, "optimize")
    now, corr = 0.0, 1
    for _ in range(steps):
        for kernel, dur in ((name, 900.0), ("void at::native::vectorized_elementwise_kernel<4>", 100.0)):
            t.op(A, "aten::mm", now - 20, now).launch(A, now - 15, corr).gpu(kernel, now, now + dur, corr)
            now += dur
            corr += 1
    return t


def test_a_trace_of_sgemm_kernels_is_a_warning_and_tf32_kernels_are_not() -> None:
    sgemm = replace(_obs(None), kernels=parse_trace(_fp32_step("ampere_sgemm_128x64_nn").data(), source="t.json"))
    f = _one(_run(sgemm), RULE)
    assert f.severity == Severity.WARNING and "90% of the GPU's kernel time is fp32 matmuls" in f.claim
    tf32 = replace(_obs(None), kernels=parse_trace(
        _fp32_step("sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32_warpgroupsize1x1x1").data(),
        source="t.json"))
    assert RULE not in _ids(_run(tf32))


def test_it_explains_the_limiting_stage_and_leads_the_headline() -> None:
    """A consumer stage that limits throughput because its GPU's matmuls run on the FP32 pipes."""
    pipe = pipeline(bottleneck="drafter", producer=0.62, consumer=0.0, trend=0.4)
    for gpm in (gpm_reading(fp32=69.2, tensor=5.8), gpm_reading(fp32=25.0, tensor=3.0, sm=80.0)):  # warning, info
        linked, headline, _ = link(_run(_obs(gpm), pipe))
        assert headline is not None and headline.rule_id == "pipeline-bottleneck-drafter"
        assert headline.because and headline.because[0] == RULE, headline
    cause = next(f for f in linked if f.rule_id == RULE)
    assert cause.explains
