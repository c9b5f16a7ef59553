"""Slow fallback paths: GatedDeltaNet on transformers' PyTorch reference code, flex_attention run eagerly."""

from __future__ import annotations

from collections.abc import Iterator

from dflash_contract.board import CompileKeys, FastpathKeys, ProbeName
from dflash_diag.analysis.findings._context import Context, items, pct, sub, text, thread_stage
from dflash_diag.model import Finding, Severity

# transformers' reference GatedDeltaNet implementations (modeling_qwen3_5 and the hub-kernels fallback).
GDN_FALLBACK_FRAMES = frozenset(
    {"torch_chunk_gated_delta_rule", "torch_recurrent_gated_delta_rule", "torch_causal_conv1d_update"}
)
# Seen in stacks at all: the Python loop of the fallback is slow enough that any sample landing in it matters.
GDN_STACK_SHARE_MIN = 0.02
EAGER_FLEX_WARNING = "flex_attention called without torch.compile"


def check(ctx: Context) -> Iterator[Finding]:
    yield from _gdn(ctx)
    yield from _flex(ctx)


def _gdn_stack_share(ctx: Context) -> tuple[float, str | None]:
    """Share of target-thread samples inside the GDN fallback, and the frame seen."""
    total = hits = 0
    seen: str | None = None
    for sample in ctx.obs.stacks:
        for thread in sample.threads:
            if thread_stage(ctx, thread) != "target":
                continue
            total += 1
            frame = next((f for f in thread.frames if f.name in GDN_FALLBACK_FRAMES), None)
            if frame is not None:
                hits += 1
                seen = seen or f"{frame.name} ({frame.short_filename}:{frame.line})"
    return (hits / total if total else 0.0), seen


def _gdn(ctx: Context) -> Iterator[Finding]:
    payload = ctx.probe(ProbeName.FASTPATH)
    kernels = {k: v for k, v in sub(payload, FastpathKeys.GDN_KERNELS).items() if isinstance(v, str)}
    fallback_kernels = sorted(k for k, v in kernels.items() if v == "torch_fallback")
    probe_says_fallback = bool(fallback_kernels) or (payload is not None and payload.get(FastpathKeys.GDN_FAST_PATH) is False
                                                   and bool(kernels))
    stack_share, stack_frame = _gdn_stack_share(ctx)
    if not probe_says_fallback and stack_share < GDN_STACK_SHARE_MIN:
        return
    evidence: list[tuple[str, str]] = []
    if fallback_kernels:
        evidence.append(("kernels on torch fallback", ", ".join(fallback_kernels)))
    reason = text(payload, FastpathKeys.GDN_REASON)
    if reason:
        evidence.append(("reason", reason))
    if payload is not None:
        evidence.append(("fla importable", str(bool(payload.get(FastpathKeys.FLA_IMPORTABLE)))))
    if stack_frame is not None:
        evidence.append(("target samples in fallback", f"{pct(stack_share)} ({stack_frame})"))
    cuda = ctx.on_cuda()
    if cuda is False:
        yield Finding(
            rule_id="gdn-torch-fallback",
            severity=Severity.INFO,
            claim="GatedDeltaNet runs transformers' PyTorch fallback: expected on CPU (fla kernels need CUDA)",
            evidence=tuple(evidence),
            remedy="Nothing to do on CPU. On a GPU, install flash-linear-attention (and causal-conv1d).",
            impact=0.0,
        )
        return
    yield Finding(
        rule_id="gdn-torch-fallback",
        severity=Severity.WARNING,
        claim="GatedDeltaNet runs transformers' slow PyTorch fallback instead of the fla kernels"
        + ("" if cuda else " (device unknown)"),
        evidence=tuple(evidence),
        remedy="pip install flash-linear-attention causal-conv1d into the training environment and restart; "
        "check the target's linear_attn.chunk_gated_delta_rule.__module__ starts with 'fla.'.",
        impact=max(stack_share, 0.3),
    )


def _flex(ctx: Context) -> Iterator[Finding]:
    payload = ctx.probe(ProbeName.FASTPATH)
    mode = text(payload, FastpathKeys.FLEX_ATTENTION)
    warnings = [w for w in items(payload, FastpathKeys.FALLBACK_WARNINGS) if isinstance(w, str) and EAGER_FLEX_WARNING in w]
    if mode != "eager" and not warnings:
        return
    evidence: list[tuple[str, str]] = [("flex_attention", mode or "unknown")]
    if warnings:
        evidence.append(("warning", warnings[0][:160]))
    limit_hits = [h for h in items(ctx.probe(ProbeName.COMPILE), CompileKeys.LIMIT_HITS)
                  if isinstance(h, dict) and "flex" in str(h.get(CompileKeys.FUNCTION, ""))]
    if limit_hits:
        evidence.append(("recompile-limit hit", f"{limit_hits[0].get('function')} in {limit_hits[0].get('thread')}"))
    yield Finding(
        rule_id="flex-attention-eager",
        severity=Severity.WARNING,
        claim="flex_attention runs eagerly: it materialises the full score matrix (slow, memory-hungry)",
        evidence=tuple(evidence),
        remedy="Wrap flex_attention in torch.compile, and keep it compiled: raise torch._dynamo.config."
        "recompile_limit in every thread that calls it (thread-local on torch >= 2.12) or make its shapes static.",
        impact=0.3,
    )
