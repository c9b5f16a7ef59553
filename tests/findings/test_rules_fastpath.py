"""The fast-path family (analysis/findings/fastpath.py): GatedDeltaNet and flex_attention on their slow fallbacks."""

from __future__ import annotations

from findings_builders import (
    HEALTHY_APP,
    HEALTHY_PROBES,
    _one,
    _run,
    board,
    healthy_board,
    stack,
    thread_sample,
)

from dflash_diag.model import NA, Frame, Severity


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
