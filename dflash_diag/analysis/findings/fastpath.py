"""Slow fallback paths: GatedDeltaNet on transformers' PyTorch reference code, flex_attention run eagerly, and a
torch kernel's slow path seen in the native stacks (``native-slow-path``)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from dflash_contract.board import CompileKeys, FastpathKeys, ProbeName
from dflash_diag.analysis.findings._context import Context, items, pct, speed_threads, sub, text
from dflash_diag.analysis.findings._registry import RuleSpec
from dflash_diag.analysis.native import MIN_SAMPLES, share_in, thread_stacks
from dflash_diag.model import Finding, Severity, Stage

# transformers' PyTorch reference implementations of the GatedDeltaNet kernels, by kernel family. A frame with
# one of these names inside transformers' modeling code is the fallback running (the fast kernels live in fla,
# causal-conv1d or a hub kernel package, under other files).
FALLBACK_FRAMES = {
    "torch_chunk_gated_delta_rule": "gated delta rule",
    "torch_recurrent_gated_delta_rule": "gated delta rule",
    "torch_causal_conv1d_update": "causal conv1d",
    "causal_conv1d_fn": "causal conv1d",
    "causal_conv1d_update": "causal conv1d",
}
_TRANSFORMERS_MODELS = "/transformers/models/"
# A measured cost: this share of the target's samples inside a fallback's Python is time the fast kernel would
# not spend. Below it the fallback is a note, not a warning (a one-launch conv fallback costs little).
GDN_STACK_SHARE_MIN = 0.05
EAGER_FLEX_WARNING = "flex_attention called without torch.compile"

RULES = (RuleSpec("gdn-torch-fallback"), RuleSpec("flex-attention-eager"), RuleSpec("native-slow-path", sampled=True))


# torch's slow paths, by the C/C++ functions that run only on them (a fast path never calls these): what the path
# is, what puts a program on it, the way back, and whether being on it is wrong in itself. Weighed by the share of
# the limiting threads' native samples inside them. torch itself picks slow_conv2d for small inputs (a batch of one,
# a few channels) and float64, and the math attention for inputs no fused kernel takes: on those two paths the time
# is said, as information, and a warning needs the flag that forced it (`cpu-kernels-slowed`, with the probes).
# QNNPACK's SSE2 kernels run only where the engine was set to the phones' on an x86 machine: a warning.
SLOW_PATHS: tuple[tuple[re.Pattern[str], str, str, bool], ...] = (
    (re.compile(r"\bslow_conv(2d|3d|_dilated\w*|_transpose\w*)|\bthnn_conv"),
     "convolutions run torch's own im2col + gemm code (slow_conv2d and kin) instead of oneDNN's kernels: oneDNN is "
     "off for them (torch.backends.mkldnn.enabled = False) or they take a dtype or layout it does not",
     "turn oneDNN back on (torch.backends.mkldnn.enabled = True; a numerics check can wrap just itself in "
     "torch.backends.mkldnn.flags(enabled=False)), and keep the convolutions in float32 or bfloat16", False),
    (re.compile(r"\b_scaled_dot_product_attention_math\b"),
     "attention runs the unfused math path (the full score matrix materialised) instead of a fused kernel: the "
     "fused backends are off (torch.backends.cuda.enable_flash_sdp(False), an sdpa_kernel context) or the inputs "
     "do not qualify for one",
     "turn the flash backend back on (torch.backends.cuda.enable_flash_sdp(True)) and pin a backend only around a "
     "numerics comparison (torch.nn.attention.sdpa_kernel)", False),
    # QNNPACK's x86 micro-kernels (its SSE2 builds): on ARM its NEON ones are the machine's own fast path.
    (re.compile(r"\bpytorch_q8\w*__sse\d|\bpytorch_qnnp\w*__sse\d"),
     "quantized (int8) ops run QNNPACK's kernels, made for ARM phones, in their SSE2 build on this x86 CPU: "
     "torch.backends.quantized.engine is 'qnnpack' where the machine's own is 'x86' or 'fbgemm'",
     "set torch.backends.quantized.engine to the machine's own ('x86' or 'fbgemm' on x86) for this process", True),
)
SLOW_PATH_WARNING_SHARE = 0.15  # of the limiting threads' native samples: time a fast path would mostly save
SLOW_PATH_NOTE_SHARE = 0.05


def check(ctx: Context) -> Iterator[Finding]:
    yield from _gdn(ctx)
    yield from _flex(ctx)
    yield from _native_slow_paths(ctx)


def _native_slow_paths(ctx: Context) -> Iterator[Finding]:
    """A torch kernel's slow path in the native stacks (doctor's second look) of the threads whose speed is the
    program's: named by the share of their native samples inside it."""
    if ctx.obs.native is None:
        return
    threads = speed_threads(ctx)
    stacks = thread_stacks(ctx.obs.native, {t.os_thread_id for t in threads if t.os_thread_id is not None})
    for code, what, fix, wrong_in_itself in SLOW_PATHS:
        share, samples = share_in(stacks, code)
        if samples < MIN_SAMPLES or share < SLOW_PATH_NOTE_SHARE:
            continue
        frame = next((f.name for s in stacks for f in s.frames if f.native and code.search(f.name)), "")
        severity = Severity.WARNING if share >= SLOW_PATH_WARNING_SHARE and wrong_in_itself else Severity.INFO
        names = [t.name for t in threads][:3]
        yield Finding(
            rule_id="native-slow-path", severity=severity,
            claim=f"{what}; {', '.join(names)} spend{'s' if len(names) == 1 else ''} {pct(share)} of "
                  f"{'its' if len(names) == 1 else 'their'} time there (native stacks)",
            evidence=(("seen in native code", frame[:160]),
                      ("share of the native samples", f"{pct(share)} of {samples} samples of {', '.join(names)}")),
            remedy=f"Put it back on the fast path: {fix}.",
            impact=share if severity >= Severity.WARNING else 0.0,
            stages=tuple(sorted({t.stage for t in threads if t.stage in (Stage.TARGET, Stage.DRAFTER)})))


def _family(kernel: str) -> str:
    name = kernel.rsplit(".", 1)[-1]
    if "fast_path" in name:
        return "gated delta rule"
    return "causal conv1d" if "conv" in name else "gated delta rule" if "delta" in name else name


def _stack_shares(ctx: Context) -> tuple[dict[str, float], dict[str, str], int]:
    """Per kernel family: share of target-thread samples inside its fallback, and the frame seen."""
    rows = ctx.stage_samples(Stage.TARGET)
    hits: dict[str, int] = {}
    seen: dict[str, str] = {}
    for thread in rows:
        for frame in thread.frames:
            family = FALLBACK_FRAMES.get(frame.name)
            if family is not None and _TRANSFORMERS_MODELS in frame.filename:
                hits[family] = hits.get(family, 0) + 1
                seen.setdefault(family, f"{frame.name} ({frame.short_filename}:{frame.line})")
                break
    total = len(rows)
    return ({k: v / total for k, v in hits.items()} if total else {}), seen, total


def _gdn(ctx: Context) -> Iterator[Finding]:
    payload = ctx.probe(ProbeName.FASTPATH)
    kernels = {k: v for k, v in sub(payload, FastpathKeys.GDN_KERNELS).items() if isinstance(v, str)}
    status: dict[str, str] = {}  # family -> "fallback" | "fast"
    for kernel, value in kernels.items():
        family = _family(kernel)
        if value == "torch_fallback":
            status[family] = "fallback"
        else:
            status.setdefault(family, "fast")
    printed = dict(ctx.stderr.fallbacks)
    for kernel in printed:
        status[_family(kernel)] = "fallback"
    shares, frames, total = _stack_shares(ctx)
    for family in shares:
        status[family] = "fallback"
    fallback = sorted(f for f, v in status.items() if v == "fallback")
    if not fallback:
        return
    fast = sorted(f for f, v in status.items() if v == "fast")
    evidence: list[tuple[str, str]] = []
    for family in fallback:
        seen = []
        if any(_family(k) == family and v == "torch_fallback" for k, v in kernels.items()):
            seen.append("bound to the torch fallback (probe)")
        if any(_family(k) == family for k in printed):
            seen.append("transformers warned it falls back (stderr)")
        if family in shares:
            seen.append(f"{pct(shares[family])} of target samples in {frames[family]}")
        evidence.append((f"{family}: PyTorch fallback", "; ".join(seen)))
    for family in fast:
        fast_kernels = [f"{k} = {v}" for k, v in kernels.items() if _family(k) == family]
        evidence.append((f"{family}: fast kernel", ", ".join(fast_kernels)))
    reason = text(payload, FastpathKeys.GDN_REASON)
    if reason:
        evidence.append(("reason", reason))
    for kernel, why in list(printed.items())[:2]:
        evidence.append((f"stderr: {kernel}", why or "falling back to its PyTorch implementation"))
    cost = max((shares.get(f, 0.0) for f in fallback), default=0.0)
    claim = ("GatedDeltaNet's " + " and ".join(fallback) + " run" + ("s" if len(fallback) == 1 else "")
             + " transformers' PyTorch fallback" + (f" ({pct(cost)} of the target's samples)" if cost else "")
             + (f"; the {' and '.join(fast)} run" + ("s" if len(fast) == 1 else "") + " fast kernels" if fast else ""))
    cuda = ctx.on_cuda()
    if cuda is False:
        yield Finding(rule_id="gdn-torch-fallback", severity=Severity.INFO,
                      claim=claim + ": expected on CPU (the fast kernels need CUDA)", evidence=tuple(evidence),
                      remedy="Nothing to do on CPU. On a GPU, install flash-linear-attention (and causal-conv1d).",
                      impact=0.0, stages=(Stage.TARGET,))
        return
    measured = cost >= GDN_STACK_SHARE_MIN and total > 0
    yield Finding(
        rule_id="gdn-torch-fallback",
        severity=Severity.WARNING if measured else Severity.INFO,
        claim=claim,
        evidence=tuple(evidence),
        remedy="Install the missing kernels into the training environment and restart: "
        + ", ".join({"gated delta rule": "flash-linear-attention", "causal conv1d": "causal-conv1d"}.get(f, f)
                    for f in fallback) + ".",
        impact=cost,
        stages=(Stage.TARGET,),
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
