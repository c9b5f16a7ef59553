"""fastpath: on this CPU machine the GatedDeltaNet fast path is unavailable and the probe says so."""

from __future__ import annotations

import functools
import warnings
from typing import Any

import pytest
import torch

from probes.fastpath import Config, FastpathProbe, bound_kernel


@pytest.fixture
def probe():
    p = FastpathProbe(Config())
    yield p
    p.close()


def test_transformers_gdn_binding_is_the_torch_fallback_on_cpu(probe: FastpathProbe) -> None:
    import transformers.models.qwen3_next.modeling_qwen3_next as m

    assert bound_kernel(m.torch_chunk_gated_delta_rule) == "torch_fallback"
    reading = probe.snapshot(0.0)
    assert reading["fla_importable"] is False and reading["fast_path_available"] is False
    assert reading["gdn_kernels"]["modeling_qwen3_next.chunk_gated_delta_rule"] == "torch_fallback"
    assert reading["gdn_fast_path"] is False and reading["fallback"] is True
    assert "not installed" in reading["gdn_reason"] or "CUDA" in reading["gdn_reason"]


def test_flex_attention_eager_warning_is_captured_and_still_shown(probe: FastpathProbe) -> None:
    from torch.nn.attention import flex_attention as fa

    fa._WARNINGS_SHOWN.discard("flex_attention_performance")
    q = torch.randn(1, 1, 16, 8)
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        # catch_warnings(record=True) swaps showwarning; put the probe's hook back in front of it
        recorder = warnings.showwarning
        warnings.showwarning = probe._showwarning
        probe._original_showwarning = recorder
        fa.flex_attention(q, q, q)
    reading = probe.snapshot(0.0)
    assert reading["flex_attention"] == "eager"
    assert any("without torch.compile" in w for w in reading["fallback_warnings"])
    assert any("without torch.compile" in str(w.message) for w in shown)  # the user still sees it


def test_transformers_fallback_warning_is_captured(probe: FastpathProbe) -> None:
    import logging

    logging.getLogger("transformers.integrations.hub_kernels").warning(
        "`chunk_gated_delta_rule` is falling back to its reference PyTorch implementation because "
        "`flash-linear-attention` is not installed."
    )
    reading = probe.snapshot(0.0)
    assert reading["fallback"] is True
    assert "falling back" in reading["fallback_warnings"][0]


def test_quiet_without_gdn_models_loaded() -> None:
    import sys

    probe = FastpathProbe(Config())
    saved = {k: sys.modules.pop(k) for k in list(sys.modules) if k.startswith("transformers.models.qwen3")}
    try:
        reading = probe.snapshot(0.0)
    finally:
        sys.modules.update(saved)
        probe.close()
    assert reading["gdn_kernels"] == {} and reading["gdn_fast_path"] is None
    assert reading["fallback_warnings"] == []
    # Not "fla is not installed": a program with no GatedDeltaNet has no fast path to miss.
    assert reading["gdn_reason"] == "no transformers GatedDeltaNet model loaded"


def test_flex_attention_eager_call_before_the_probe_started_is_still_seen() -> None:
    from torch.nn.attention import flex_attention as fa

    fa._WARNINGS_SHOWN.discard("flex_attention_performance")
    q = torch.randn(1, 1, 16, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the user silenced it, and the probe was not running yet
        fa.flex_attention(q, q, q)
    probe = FastpathProbe(Config())
    try:
        assert probe.snapshot(0.0)["flex_attention"] == "eager"
    finally:
        probe.close()


def test_bound_kernel_across_transformers_versions() -> None:
    def fla_kernel() -> None: ...

    def torch_chunk_gated_delta_rule() -> None: ...

    fla_kernel.__module__ = "fla.ops.gated_delta_rule.chunk"  # older transformers bind fla's function itself
    torch_chunk_gated_delta_rule.__module__ = "transformers.models.qwen3_next.modeling_qwen3_next"
    assert bound_kernel(fla_kernel) == "fla"
    assert bound_kernel(torch_chunk_gated_delta_rule) == "torch_fallback"
    assert bound_kernel(len) is None  # unknowable: neither fast nor fallback is claimed


def _hub_wrapper(torch_function: Any, implementation: Any) -> Any:
    """transformers' use_kernel_func_from_hub_with_fallback: the choice lives in a closure cell."""
    is_new_implementation = implementation is not torch_function

    @functools.wraps(torch_function)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        return (implementation if is_new_implementation else torch_function)(*args, **kwargs)

    return wrapped


def _as_func_module(func: Any) -> Any:
    """transformers 5.25's use_kernelized_func: the wrapper bound as an nn.Module whose forward closes over it."""

    class Func(torch.nn.Module):
        def forward(self, *args: Any, **kwargs: Any) -> Any:
            return func(*args, **kwargs)

    return Func()


def test_bound_kernel_sees_through_a_module_standing_in_for_the_function() -> None:
    def torch_chunk_gated_delta_rule() -> None: ...

    def fla_chunk() -> None: ...

    torch_chunk_gated_delta_rule.__module__ = "transformers.models.qwen3_5.modeling_qwen3_5"
    fla_chunk.__module__ = "fla.ops.gated_delta_rule.chunk"
    fallback = _as_func_module(_hub_wrapper(torch_chunk_gated_delta_rule, torch_chunk_gated_delta_rule))
    fast = _as_func_module(_hub_wrapper(torch_chunk_gated_delta_rule, fla_chunk))
    assert bound_kernel(fallback) == "torch_fallback"
    assert bound_kernel(fast) == "fla"  # the wrapper's name is torch_*, its choice is fla: the choice wins
    assert bound_kernel(_as_func_module(len)) is None
