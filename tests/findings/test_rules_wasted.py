"""The wasted-work family (analysis/findings/wasted.py): full-vocabulary logits nobody reads."""

from __future__ import annotations

from findings_builders import (
    HEALTHY_APP,
    HEALTHY_PROBES,
    _one,
    _run,
    board,
    stack,
    thread_sample,
)

from dflash_diag.model import Frame


def test_full_vocab_logits_in_target_stacks() -> None:
    frames = (Frame("compute_logits", "/app/target.py", 55), Frame("run_target", "/app/target.py", 10))
    stacks = [stack([thread_sample("target-0", frames, tid=11)], t=i) for i in range(3)]
    f = _one(_run(stacks=stacks), "wasted-full-vocab-logits")
    assert "target.py:55" in dict(f.evidence)["target samples in logits"]


def test_full_vocab_logits_from_config_flag() -> None:
    app = {**HEALTHY_APP, "config": {**HEALTHY_APP["config"], "target_full_logits": True}}
    assert _one(_run(boards=(board(HEALTHY_PROBES, app),)), "wasted-full-vocab-logits")


def test_a_target_stage_that_samples_tokens_from_its_logits_wastes_none() -> None:
    # A producer stage that generates text (transformers' generate, its top-k warper): the logits are what it samples
    # from. Read as the projection, it was a warning on a healthy program's first run (casebook batch 25).
    lib = "/venv/lib/python3.11/site-packages/transformers/generation"
    frames = (Frame("TopKLogitsWarper.__call__", f"{lib}/logits_process.py", 622),
              Frame("LogitsProcessorList.__call__", f"{lib}/logits_process.py", 96),
              Frame("GenerationMixin._sample", f"{lib}/utils.py", 2800), Frame("continue_songs", "/app/teacher.py", 37))
    stacks = [stack([thread_sample("target-0", frames, tid=11)], t=i) for i in range(3)]
    assert _run(stacks=stacks) == ()
    # The program's own sampling loop over its own projection: the same.
    own = (Frame("compute_logits", "/app/target.py", 55), Frame("sample", "/app/target.py", 80))
    assert _run(stacks=[stack([thread_sample("target-0", own, tid=11)], t=i) for i in range(3)]) == ()


def test_logits_in_drafter_threads_are_not_waste() -> None:
    frames = (Frame("chunked_logits", "/app/loss.py", 55),)
    stacks = [stack([thread_sample("drafter-0", frames, tid=12)])]
    assert _run(stacks=stacks) == ()


def test_on_a_gpu_the_allocator_and_the_kernel_trace_say_what_the_waste_costs() -> None:
    """The projection runs asynchronously on a GPU: its cost is memory and kernel time, read from the allocator probe
    (bytes made and dropped per second, the peak) and from a kernel trace when one was taken."""
    import dataclasses

    from dflash_diag.model.kernels import KernelTrace, TraceSpan

    gpu = {**HEALTHY_PROBES, "allocator": {"devices": {"0": {
        **HEALTHY_PROBES["allocator"]["devices"]["0"], "allocated_bytes_per_s": 5.0 * 2**30,
        "allocated_peak_bytes": 41 * 2**30}}}}
    app = {**HEALTHY_APP, "config": {**HEALTHY_APP["config"], "target_full_logits": True}}
    spans = tuple(TraceSpan("kernel", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", 1000.0 * i, 3100.0, 7, device=0,
                            correlation=i) for i in range(4))
    spans += tuple(TraceSpan("cuda_runtime", "cudaLaunchKernel", 1000.0 * i - 5, 4.0, 11, correlation=i)
                   for i in range(4))
    trace = KernelTrace(pid=4242, spans=tuple(sorted(spans, key=lambda s: s.start_us)),
                        thread_names={11: "target-0"})
    from findings_builders import NOW_S, observation, pipeline

    from dflash_diag.analysis.findings import evaluate

    obs = dataclasses.replace(observation((board(gpu, app),)), kernels=trace)
    f = _one(evaluate(obs, (), pipeline(), now_wall_s=NOW_S), "wasted-full-vocab-logits")
    evidence = dict(f.evidence)
    assert evidence["cuda:0 memory (allocator probe)"] == "5.0 GiB/s allocated and freed, peak 41.0 GiB allocated"
    assert evidence["GPU time launched (kernel trace)"] == "target-0 100%"
    assert evidence["longest kernels (kernel trace)"].startswith("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n: 4 x 3.10 ms")


def _projection(site: str, grad: bool = False) -> dict:
    return {"site": site, "thread": "tgt-worker", "calls": 6, "shape": [4, 2048, 151936],
            "output_bytes": 4 * 2048 * 151936 * 2, "grad": grad, "window_s": 0.5}


def _with_projections(rows: list[dict], unused_line: int | None = None) -> list:
    import dataclasses

    from findings_builders import NOW_S, observation, pipeline

    from dflash_diag.analysis.findings import evaluate
    from dflash_diag.model import SourceLine

    probes = {**HEALTHY_PROBES, "allocator": {**HEALTHY_PROBES["allocator"], "vocab_projections": rows}}
    code = () if unused_line is None else (SourceLine(
        filename="/srv/casebook/gpu_wasted_logits/pipeline.py", line=30, text="hidden = backbone(ids)",
        function="target_worker",
        unused_logits=((unused_line, "logits = lm_head(hidden)  # copied from eval"),)),)
    obs = dataclasses.replace(observation((board(probes, HEALTHY_APP),)), code=code)
    return list(evaluate(obs, (), pipeline(), now_wall_s=NOW_S))


def test_a_projection_measured_on_the_gpu_at_a_line_never_read_is_a_warning() -> None:
    """The GPU case: no sample lands in the projection (it runs asynchronously), but the probe saw it run with
    autograd off at the line the code never reads: measured waste, with its size."""
    from dflash_diag.model import Severity

    f = _one(tuple(_with_projections([_projection("gpu_wasted_logits/pipeline.py:31")], unused_line=31)),
             "wasted-full-vocab-logits")
    assert f.severity == Severity.WARNING
    assert f.claim.startswith("gpu_wasted_logits/pipeline.py:31 computes full-vocabulary logits that the function "
                              "never reads ([4x2048x151936], 2.32 GiB a call in tgt-worker")


def test_a_projection_whose_output_may_be_read_is_information_and_one_that_trains_is_nothing() -> None:
    from dflash_diag.model import Severity

    f = _one(tuple(_with_projections([_projection("spec/target.py:88")])), "wasted-full-vocab-logits")
    assert f.severity == Severity.INFO and "if only hidden states are read from it" in f.claim
    assert _with_projections([_projection("spec/target.py:88", grad=True)]) == []  # a model trained on its logits
