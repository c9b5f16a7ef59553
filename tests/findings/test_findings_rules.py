"""Every rule: its planted condition raises it (with evidence and a remedy), the healthy case raises nothing."""

from __future__ import annotations

from typing import Any

import pytest
from findings_builders import (
    HEALTHY_APP,
    HEALTHY_PROBES,
    HEALTHY_THREADS,
    NOW_S,
    board,
    healthy_board,
    observation,
    pipeline,
    stack,
    thread_sample,
    thread_stats,
)

from dflash_diag.analysis.findings import RULE_IDS, evaluate, healthy
from dflash_diag.model import NA, Finding, Frame, Severity, ThreadState


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


def test_healthy_run_raises_nothing() -> None:
    assert _run() == ()


def test_no_board_is_info_only() -> None:
    findings = _run(boards=NA("no board published"))
    assert _ids(findings) == {"no-probes"}
    assert healthy(findings)


# --- pipeline ------------------------------------------------------------------------------------------


def test_drafter_bottleneck_names_what_targets_do() -> None:
    pipe = pipeline(bottleneck="drafter", producer=0.62, consumer=0.0, trend=0.4,
                    target_shares={ThreadState.QUEUE_PUT: 0.62, ThreadState.NATIVE: 0.3},
                    drafter_shares={ThreadState.CHECKPOINT: 0.4, ThreadState.NATIVE: 0.5})
    f = _one(_run(pipe=pipe), "pipeline-bottleneck-drafter")
    assert f.severity == Severity.WARNING
    evidence = dict(f.evidence)
    assert evidence["target blocked in put"] == "62%"
    assert "queue put 62%" in evidence["target meanwhile"]
    assert "ckpt recompute 40%" in evidence["drafter states"]


def test_target_bottleneck_from_starvation_alone() -> None:
    pipe = pipeline(bottleneck="unknown", producer=0.0, consumer=0.3)
    f = _one(_run(pipe=pipe), "pipeline-bottleneck-target")
    assert f.severity == Severity.INFO  # 30% starved: worth naming, not alarming


def test_balanced_pipeline_raises_nothing() -> None:
    assert _run(pipe=pipeline(bottleneck="drafter", producer=0.05, consumer=0.04, trend=0.0)) == ()


# --- fast paths ---------------------------------------------------------------------------------------


def test_gdn_fallback_on_cuda_without_measured_cost_is_info() -> None:
    b = healthy_board(fastpath={"gdn_kernels": {"chunk_gated_delta_rule": "torch_fallback"}, "gdn_fast_path": False,
                                "fla_importable": False, "gdn_reason": "fla not installed"})
    f = _one(_run(boards=(b,)), "gdn-torch-fallback")
    assert f.severity == Severity.INFO  # bound to the fallback, but no sample shows it costing anything
    assert f.claim.startswith("GatedDeltaNet's gated delta rule runs transformers' PyTorch fallback")


def test_gdn_claim_says_exactly_which_kernel_fell_back() -> None:
    """The H200 false alarm: only causal_conv1d fell back, the gated delta rule ran on fla."""
    b = healthy_board(fastpath={"gdn_kernels": {"modeling_qwen3_5.chunk_gated_delta_rule": "fla",
                                                "modeling_qwen3_5.causal_conv1d_fn": "torch_fallback"},
                                "gdn_fast_path": False, "fla_importable": True})
    f = _one(_run(boards=(b,)), "gdn-torch-fallback")
    assert f.severity == Severity.INFO
    assert "causal conv1d runs transformers' PyTorch fallback" in f.claim
    assert "the gated delta rule runs fast kernels" in f.claim
    assert dict(f.evidence)["gated delta rule: fast kernel"] == "modeling_qwen3_5.chunk_gated_delta_rule = fla"


def test_gdn_fallback_with_measured_cost_on_cuda_is_a_warning() -> None:
    b = healthy_board(fastpath={"gdn_kernels": {"chunk_gated_delta_rule": "torch_fallback"}})
    frames = (Frame("torch_chunk_gated_delta_rule", "/sp/transformers/models/qwen3_5/modeling_qwen3_5.py", 300),
              Frame("forward", "/app/target.py", 20))
    stacks = [stack([thread_sample("target-0", frames, tid=11)], t=i * 0.1) for i in range(5)]
    f = _one(_run(boards=(b,), stacks=stacks), "gdn-torch-fallback")
    assert f.severity == Severity.WARNING and "(100% of the target's samples)" in f.claim


def test_gdn_fallback_on_cpu_is_expected() -> None:
    app = {**HEALTHY_APP, "config": {"device": "cpu"}, "threads": {"target-0": {"role": "target", "device": "cpu"}}}
    probes = {**HEALTHY_PROBES, "fastpath": {"gdn_kernels": {"chunk_gated_delta_rule": "torch_fallback"},
                                             "gdn_fast_path": False, "gdn_reason": "no CUDA"}}
    f = _one(_run(boards=(board(probes, app),)), "gdn-torch-fallback")
    assert f.severity == Severity.INFO and "expected on CPU" in f.claim


def test_gdn_fallback_seen_in_target_stacks_without_probes() -> None:
    frames = (Frame("torch_chunk_gated_delta_rule", "/sp/transformers/models/qwen3_5/modeling_qwen3_5.py", 300),
              Frame("forward", "/app/target.py", 20))
    stacks = [stack([thread_sample("target-0", frames, tid=11)], t=i * 0.1) for i in range(5)]
    f = _one(_run(boards=NA("no board"), stacks=stacks), "gdn-torch-fallback")
    assert "100% of target samples in torch_chunk_gated_delta_rule" in dict(f.evidence)["gated delta rule: PyTorch fallback"]


def test_flex_attention_eager() -> None:
    b = healthy_board(fastpath={"flex_attention": "eager",
                                "fallback_warnings": ["flex_attention called without torch.compile() - this will ..."]})
    assert _one(_run(boards=(b,)), "flex-attention-eager").severity == Severity.WARNING


# --- stale code ---------------------------------------------------------------------------------------


def test_stale_code_names_the_module_to_restart_for() -> None:
    b = healthy_board(codedrift={"stale": [{"module": "reference_trainer.loss", "file": "/app/loss.py",
                                            "import_wall_s": 100.0, "mtime_wall_s": 700.0, "how": "mtime>import"}]})
    f = _one(_run(boards=(b,)), "stale-code")
    assert "restart to pick up reference_trainer.loss" in f.claim
    assert dict(f.evidence)["/app/loss.py"] == "changed 600 s after import"


# --- checkpoint ---------------------------------------------------------------------------------------


def test_grad_none_is_critical_and_blames_reentrant() -> None:
    b = healthy_board(checkpoint={"calls": {"reentrant": 96, "non_reentrant": 0}, "grad_none_count": 57,
                                  "grad_none_params": ["layers.0.q.weight"], "trainable_params": 58,
                                  "sites": [{"site": "loss.py:88", "use_reentrant": True, "calls": 96}]})
    findings = _run(boards=(b,))
    f = _one(findings, "checkpoint-grad-none")
    assert f.severity == Severity.CRITICAL and findings[0] is f
    assert "use_reentrant=True" in f.claim
    assert _one(findings, "checkpoint-reentrant").severity == Severity.INFO


def test_recompute_heavy_from_thread_states() -> None:
    threads = (thread_stats("drafter-0", "drafter", {ThreadState.CHECKPOINT: 0.6, ThreadState.NATIVE: 0.4}, tid=12,
                            n=60),)
    f = _one(_run(threads=threads), "checkpoint-recompute-heavy")
    assert "60%" in f.claim and "saved-tensor hooks" in dict(f.evidence)["mode"]
    assert f.severity == Severity.INFO  # recompute compute is a cost, not a fault


def test_checkpoint_hook_python_is_a_warning() -> None:
    hook = (Frame("unpack_hook", "/sp/torch/utils/checkpoint.py", 1120), Frame("backward", "/sp/torch/_tensor.py", 5))
    work = (Frame("mm", "libtorch.so", 0, native=True), Frame("loss", "/app/loss.py", 9))
    stacks = [stack([thread_sample("drafter-0", hook if i % 2 else work, tid=12, gil=bool(i % 2))], t=i)
              for i in range(20)]
    threads = (thread_stats("drafter-0", "drafter", {ThreadState.CHECKPOINT: 0.5, ThreadState.NATIVE: 0.5}, tid=12,
                            n=20),)
    f = _one(_run(threads=threads, stacks=stacks), "checkpoint-recompute-heavy")
    assert f.severity == Severity.WARNING and "checkpoint machinery's own Python" in f.claim
    assert dict(f.evidence)["checkpoint Python holding the GIL"] == "50% at checkpoint.py:1120 (unpack_hook)"


def test_a_thread_in_backward_holding_the_gil_is_not_checkpoint_machinery() -> None:
    """torch/autograd/graph.py is also where every loss.backward() enters the engine: no checkpoint there."""
    entry = (Frame("_engine_run_backward", "/sp/torch/autograd/graph.py", 829),
             Frame("backward", "/sp/torch/autograd/__init__.py", 364), Frame("backward", "/sp/torch/_tensor.py", 630),
             Frame("train_step", "/app/main.py", 40))
    stacks = [stack([thread_sample("drafter-0", entry, tid=12, gil=True)], t=i) for i in range(20)]
    threads = (thread_stats("drafter-0", "drafter", {ThreadState.NATIVE: 1.0}, tid=12, n=20),)
    assert "checkpoint-recompute-heavy" not in {f.rule_id for f in _run(threads=threads, stacks=stacks)}


def test_recompute_share_from_few_samples_is_not_enough() -> None:
    threads = (thread_stats("drafter-0", "drafter", {ThreadState.CHECKPOINT: 0.5, ThreadState.NATIVE: 0.5}, tid=12,
                            n=6),)
    assert _run(threads=threads) == ()


# --- compile ------------------------------------------------------------------------------------------


def test_recompile_storm_lists_reasons() -> None:
    b = healthy_board(compile={"recompiles": 12, "recent_recompiles": [
        {"function": "flex_attention", "thread": "drafter-0", "reason": "0/3: tensor 'q' size mismatch at index 2"}] * 4})
    f = _one(_run(boards=(b,)), "compile-recompile-storm")
    assert "size mismatch" in dict(f.evidence)["reason (x4)"]


def test_recompile_limit_fallback_to_eager() -> None:
    b = healthy_board(compile={"recompile_limit_hits": 1, "limit_hits": [
        {"function": "flex_attention", "reason": "requires_grad mismatch", "thread": "drafter-1"}],
        "recompile_limit": {"MainThread": 64, "drafter-1": 8}})
    f = _one(_run(boards=(b,)), "compile-recompile-limit")
    assert "flex_attention" in f.claim and "drafter-1=8" in dict(f.evidence)["recompile_limit by thread"]


def test_graph_breaks_growing_in_window_is_a_warning() -> None:
    first = board({**HEALTHY_PROBES, "compile": {**HEALTHY_PROBES["compile"], "graph_breaks": 2}}, HEALTHY_APP)
    last = board({**HEALTHY_PROBES, "compile": {**HEALTHY_PROBES["compile"], "graph_breaks": 6,
                                                 "graph_break_reasons": {"Unsupported Tensor.item() call": 6}}},
                 HEALTHY_APP, wall_time_s=NOW_S + 2)
    f = _one(_run(boards=(first, last), now=NOW_S + 2), "compile-graph-breaks")
    assert f.severity == Severity.WARNING and dict(f.evidence)["new in this window"] == "4"


def test_compile_in_progress_is_warm_up() -> None:
    b = healthy_board(compile={"compiling_now": True, "compile_time_s": 31.0})
    f = _one(_run(boards=(b,)), "warming-up")
    assert f.severity == Severity.INFO and f.kind == "state"
    assert "31 s of finished compiles (probe)" in f.claim


def test_compile_from_several_threads_on_unsafe_torch() -> None:
    b = healthy_board(compile={"by_thread": {"drafter-0": {"compiles": 2}, "drafter-1": {"compiles": 2}}})
    f = _one(_run(boards=(b,)), "compile-multi-thread")
    assert "drafter-0, drafter-1" in dict(f.evidence)["compiling threads"]


# --- CUDA graphs --------------------------------------------------------------------------------------


def test_cudagraph_skipped_with_reason() -> None:
    b = healthy_board(cudagraphs={"skips": 1, "skip_reasons": ["skipping cudagraphs due to mutated inputs (1 instances)"]})
    f = _one(_run(boards=(b,)), "cudagraph-skipped")
    assert f.severity == Severity.INFO and "mutated inputs" in f.claim  # could be faster: cost not measured


def test_cudagraph_rerecorded_every_step() -> None:
    first = board({**HEALTHY_PROBES, "cudagraphs": {**HEALTHY_PROBES["cudagraphs"], "rerecords": 10}},
                  {**HEALTHY_APP, "step": 100})
    last = board({**HEALTHY_PROBES, "cudagraphs": {**HEALTHY_PROBES["cudagraphs"], "rerecords": 14}},
                 {**HEALTHY_APP, "step": 104}, wall_time_s=NOW_S + 2)
    f = _one(_run(boards=(first, last), now=NOW_S + 2), "cudagraph-rerecord")
    assert dict(f.evidence)["re-records per step"] == "1.00"


def test_cudagraph_capture_from_several_threads_on_old_torch() -> None:
    b = healthy_board(cudagraphs={"torch": "2.11.0", "capture_threads": ["drafter-0", "drafter-1"]})
    assert _one(_run(boards=(b,)), "cudagraph-multi-thread").severity == Severity.WARNING


def test_cudagraph_capture_from_several_threads_is_fine_on_2_13() -> None:
    b = healthy_board(cudagraphs={"torch": "2.13.0", "capture_threads": ["drafter-0", "drafter-1"]})
    assert _run(boards=(b,)) == ()


# --- allocator ----------------------------------------------------------------------------------------


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


# --- GIL ----------------------------------------------------------------------------------------------


def test_gil_contention_names_holder_and_waiters() -> None:
    threads = (
        thread_stats("logger", "other", {ThreadState.PYTHON: 0.9}, tid=13, gil_held_pct=90.0),
        thread_stats("drafter-0", "drafter", {ThreadState.GIL_WAIT: 0.5, ThreadState.NATIVE: 0.5}, tid=12),
    )
    b = healthy_board(gil={"contention_share": 0.7, "wait_mean_ms": 9.8, "wait_p99_ms": 43.0,
                           "threads": {"logger": {"cpu_share": 0.95}, "drafter-0": {"cpu_share": 0.3}}})
    f = _one(_run(boards=(b,), threads=threads), "gil-contention")
    assert f.claim.startswith("GIL contention: logger (not a pipeline stage) holds the GIL 90% of the time")
    assert f.claim.endswith("while drafter-0 waits for it (70%)") and f.stages == ("drafter",)
    assert "mean 9.8 ms" in dict(f.evidence)["wait per acquire"]
    assert dict(f.evidence)["CPU by thread (probe)"] == "logger 95%, drafter-0 30%"


# --- host sync ----------------------------------------------------------------------------------------


def test_host_sync_storm_points_at_the_line() -> None:
    sync = (Frame("cudaStreamSynchronize", "libcudart.so", 0, native=True),
            Frame("_chunked_loss", "/app/loss.py", 42), Frame("step", "/app/train.py", 9))
    work = (Frame("mm", "libtorch.so", 0, native=True), Frame("step", "/app/train.py", 9))
    timeline = [ThreadState.GPU_WAIT, ThreadState.GPU_WAIT, ThreadState.NATIVE, ThreadState.GPU_WAIT] * 2
    stacks = [stack([thread_sample("drafter-0", sync if s == ThreadState.GPU_WAIT else work, tid=12)], t=i)
              for i, s in enumerate(timeline)]
    threads = (thread_stats("drafter-0", "drafter", {ThreadState.GPU_WAIT: 0.75, ThreadState.NATIVE: 0.25}, tid=12,
                            n=8, timeline=timeline),)
    f = _one(_run(threads=threads, stacks=stacks), "host-sync-storm")
    assert "loss.py:42" in f.claim and dict(f.evidence)["drafter in explicit host syncs"] == "75%"
    assert dict(f.evidence)["sync site"] == "loss.py:42 (_chunked_loss) (6 samples)"


def test_waiting_on_a_busy_gpu_in_ops_is_not_a_sync_storm() -> None:
    """A thread in backward() or an op while the GPU is busy waits on a full launch queue: GPU-bound, healthy
    (the H200 casebook's healthy programs: 30-68% GPU wait at loss.backward() and opt.step())."""
    busy = (Frame("_engine_run_backward", "/sp/torch/autograd/graph.py", 829), Frame("step", "/app/train.py", 9))
    timeline = [ThreadState.GPU_WAIT, ThreadState.GPU_WAIT, ThreadState.NATIVE, ThreadState.GPU_WAIT] * 5
    stacks = [stack([thread_sample("drafter-0", busy, tid=12)], t=i) for i in range(len(timeline))]
    threads = (thread_stats("drafter-0", "drafter", {ThreadState.GPU_WAIT: 0.75, ThreadState.NATIVE: 0.25}, tid=12,
                            n=len(timeline), timeline=timeline),)
    assert "host-sync-storm" not in {f.rule_id for f in _run(threads=threads, stacks=stacks)}


def test_one_sample_is_not_a_rate() -> None:
    threads = (
        thread_stats("logger", "other", {ThreadState.PYTHON: 1.0}, tid=13, gil_held_pct=100.0, n=1),
        thread_stats("drafter-0", "drafter", {ThreadState.GIL_WAIT: 1.0}, tid=12, n=1),
    )
    assert _run(threads=threads) == ()


# --- wasted work --------------------------------------------------------------------------------------


def test_full_vocab_logits_in_target_stacks() -> None:
    frames = (Frame("compute_logits", "/app/target.py", 55), Frame("run_target", "/app/target.py", 10))
    stacks = [stack([thread_sample("target-0", frames, tid=11)], t=i) for i in range(3)]
    f = _one(_run(stacks=stacks), "wasted-full-vocab-logits")
    assert "target.py:55" in dict(f.evidence)["target samples in logits"]


def test_full_vocab_logits_from_config_flag() -> None:
    app = {**HEALTHY_APP, "config": {**HEALTHY_APP["config"], "target_full_logits": True}}
    assert _one(_run(boards=(board(HEALTHY_PROBES, app),)), "wasted-full-vocab-logits")


def test_logits_in_drafter_threads_are_not_waste() -> None:
    frames = (Frame("chunked_logits", "/app/loss.py", 55),)
    stacks = [stack([thread_sample("drafter-0", frames, tid=12)])]
    assert _run(stacks=stacks) == ()


# --- liveness, ordering, robustness -------------------------------------------------------------------


def test_stale_board_on_a_live_process_says_hung() -> None:
    f = _one(_run(now=NOW_S + 120), "board-stale")
    assert "120 s" in f.claim


def test_exited_process() -> None:
    assert _one(_run(alive=False), "process-exited").severity == Severity.WARNING


def test_sorted_most_severe_then_impact() -> None:
    b = healthy_board(checkpoint={"grad_none_count": 3}, codedrift={"stale": [{"module": "m", "file": "/m.py"}]},
                      gil={"contention_share": 0.9})
    findings = _run(boards=(b,))
    severities = [int(f.severity) for f in findings]
    assert severities == sorted(severities, reverse=True)
    warnings = [f for f in findings if f.severity == Severity.WARNING]
    assert [f.rule_id for f in warnings] == ["gil-contention", "stale-code"]  # impact 0.9 before 0.2


@pytest.mark.parametrize("garbage", [{"stale": "nope"}, {"stale": [1, None, {"module": 3}]}, {"checked_modules": "x"}])
def test_odd_payloads_never_raise(garbage: dict[str, Any]) -> None:
    b = healthy_board(codedrift=garbage, checkpoint={"calls": "x", "grad_none_count": float("nan")},
                      allocator={"devices": {"0": "bad"}}, compile={"recent_recompiles": [None, "x"], "recompiles": 50})
    findings = _run(boards=(b,))
    assert "rule-error" not in _ids(findings)


def test_every_raised_rule_id_is_registered() -> None:
    assert {"compile-recompile-storm"} <= set(RULE_IDS)


def test_queue_backing_up_alone_is_info() -> None:
    f = _one(_run(pipe=pipeline(bottleneck="drafter", producer=0.0, consumer=0.0, trend=0.5)),
             "pipeline-bottleneck-drafter")
    assert f.severity == Severity.INFO and "q_hs backing up (+0.50 items/s)" in f.claim


def test_gil_contention_from_the_probe_alone() -> None:
    b = healthy_board(gil={"contention_share": 0.8, "wait_mean_ms": 31.0})
    f = _one(_run(boards=(b,), threads=()), "gil-contention")
    assert f.claim == "GIL contention: threads wait for the GIL 80% of the time"


def test_concurrent_compiles_seen_in_stacks() -> None:
    threads = (thread_stats("drafter-0", "drafter", {ThreadState.COMPILE: 1.0}, tid=12),
               thread_stats("drafter-1", "drafter", {ThreadState.COMPILE: 0.8, ThreadState.NATIVE: 0.2}, tid=13))
    findings = _run(threads=threads)
    f = _one(findings, "compile-multi-thread")
    assert dict(f.evidence)["seen compiling concurrently"] == "drafter-0, drafter-1"
    assert _one(findings, "warming-up").severity == Severity.INFO


def test_every_rule_is_documented() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "findings.md").read_text()
    missing = [rule for rule in RULE_IDS if f"`{rule}`" not in doc]
    assert missing == []


def test_host_sync_site_shows_the_line_text() -> None:
    import dataclasses

    sync = (Frame("_chunked_loss", "/app/loss.py", 42), Frame("step", "/app/train.py", 9))
    timeline = [ThreadState.GPU_WAIT] * 6
    stacks = [stack([thread_sample("drafter-0", sync, tid=12)], t=i) for i in range(6)]
    threads = (thread_stats("drafter-0", "drafter", {ThreadState.GPU_WAIT: 1.0}, tid=12, n=6, timeline=timeline),)
    obs = dataclasses.replace(observation((healthy_board(),), stacks),
                              source_lines={"/app/loss.py:42": "total += loss.item()"})
    f = _one(evaluate(obs, threads, pipeline(), now_wall_s=NOW_S), "host-sync-storm")
    assert "`total += loss.item()`" in f.claim


def test_every_trainer_scenario_is_documented() -> None:
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    tree = ast.parse((root / "reference_trainer" / "scenarios.py").read_text())
    names = next(
        [k.value for k in node.value.keys if isinstance(k, ast.Constant)]
        for node in ast.walk(tree)
        if isinstance(node, ast.AnnAssign | ast.Assign) and "SCENARIOS" in ast.unparse(node).split("=")[0]
        and isinstance(node.value, ast.Dict)
    )
    doc = (root / "docs" / "scenarios.md").read_text()
    assert names and [n for n in names if f"## `{n}`" not in doc] == []


# --- GPU utilisation ----------------------------------------------------------------------------------


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
    assert "cuda:1 (drafter) is busy only 22%" in f.claim and "GIL wait 50%" in dict(f.evidence)["their time"]


def test_gpu_idle_because_of_the_queue_is_the_pipeline_rule() -> None:
    obs = _gpu_obs(22.0, {"drafter-0": {"role": "drafter", "device": "cuda:1"}})
    threads = (thread_stats("drafter-0", "drafter", {ThreadState.QUEUE_GET: 0.7, ThreadState.NATIVE: 0.3}, tid=12),)
    assert "gpu-underused" not in _ids(evaluate(obs, threads, pipeline(), now_wall_s=NOW_S))


def test_busy_gpu_raises_nothing() -> None:
    obs = _gpu_obs(95.0, {"drafter-0": {"role": "drafter", "device": "cuda:1"}})
    assert evaluate(obs, HEALTHY_THREADS, pipeline(), now_wall_s=NOW_S) == ()
