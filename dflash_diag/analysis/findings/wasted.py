"""Wasted work: the target computes full-vocabulary logits that the drafter never uses.

On a CPU the projection's cost is in the samples (the thread computes it). On a GPU it runs asynchronously: the
launching thread is sampled elsewhere, and the cost is kernel time and memory. There the finding carries what the
GPU side measured beside the code: the caching allocator's bytes handed out per second and its peak (the
``allocator`` probe; a [tokens x vocabulary] tensor made and dropped every step shows in both), and, when a kernel
trace was taken, the GPU time of the thread that launched it and the longest kernels."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from dflash_contract.board import AllocatorKeys, ProbeName
from dflash_diag.analysis.findings._context import Context, frame_site, items, num, pct, sub
from dflash_diag.analysis.findings._registry import RuleSpec
from dflash_diag.model import Finding, Severity, Stage

# A vocabulary projection, by function name or by the text of the program's line that calls it; the target of a
# drafter pipeline only needs hidden states. ``*ForCausalLM.forward`` is transformers' model-with-head forward.
LOGITS_FRAME = re.compile(r"lm_head|logits|unembed|ForCausalLM\.forward$", re.IGNORECASE)
LOGITS_LINE = re.compile(r"lm_head\s*\(|\blogits\s*=|unembed\s*\(|\.logits\b")
# Config flags of the app that turn the full-vocab target forward on; `logits_to_keep` 0 means "all positions".
FULL_LOGITS_FLAGS = ("target_full_logits", "full_logits", "compute_target_logits", "target_logits")
# Any steady share of target samples in a logits projection is waste; 5% keeps a one-off sample from alarming.
LOGITS_STACK_SHARE = 0.05
# Code that consumes logits rather than computing them: a sampling loop (transformers' generate and its logits
# processors and warpers, a hand-written `sample`). A stage that generates tokens needs the logits it samples from:
# its time there is no waste (a top-k warper read as the projection was a false warning on a healthy program).
CONSUMES_LOGITS = re.compile(r"(^|\.)(generate|_?sample|greedy_search|beam_search)$|Warper\b|Processor\b|"
                             r"LogitsProcessorList")
GENERATION_FILES = ("/generation/",)  # transformers/generation/utils.py, logits_process.py

RULES = (RuleSpec("wasted-full-vocab-logits"),)


def check(ctx: Context) -> Iterator[Finding]:
    config = ctx.app_config()
    flags = [k for k in FULL_LOGITS_FLAGS if config.get(k) is True]
    keep = config.get("logits_to_keep")
    if keep == 0 and not isinstance(keep, bool):
        flags.append("logits_to_keep=0")
    share, site = _stack_share(ctx)
    unused = _unused_in_code(ctx)
    projected = measured_projections(ctx)
    wasted_calls = [p for p in projected if _site_unused(p, unused)]
    if not flags and share < LOGITS_STACK_SHARE and not unused and not projected:
        return
    evidence: list[tuple[str, str]] = []
    if flags:
        evidence.append(("config", ", ".join(flags)))
    if site is not None:
        evidence.append(("target samples in logits", f"{pct(share)} ({site})"))
    for where, text_ in unused[:3]:
        evidence.append(("computed, never read", f"{where} `{text_}`"))
    for row in projected[:3]:
        evidence.append(("vocabulary projection (allocator probe)", _projection_text(row)))
    vocab = config.get("vocab_size")
    if isinstance(vocab, int) and not isinstance(vocab, bool):
        evidence.append(("vocab", f"{vocab:,} tokens"))
    evidence.extend(gpu_side_evidence(ctx))
    measured = bool(flags) or share >= LOGITS_STACK_SHARE or bool(wasted_calls)
    if wasted_calls:
        # Measured on the GPU side: the probe saw the projection run at a line whose result the code never reads.
        row = wasted_calls[0]
        claim = (f"{row.get(AllocatorKeys.SITE)} computes full-vocabulary logits that the function never reads "
                 f"({_output_text(row)} in {row.get(AllocatorKeys.THREAD)}, thrown away at every call): wasted GPU "
                 "time and memory")
    elif measured:
        claim = ("the target stage computes full-vocabulary logits" + (f" ({pct(share)} of its samples at {site})"
                 if site else "") + ": the drafter only needs its hidden states")
    elif projected and not unused:
        row = projected[0]
        claim = (f"{row.get(AllocatorKeys.SITE)} projects onto the whole vocabulary with autograd off "
                 f"({_output_text(row)} in {row.get(AllocatorKeys.THREAD)}): if only hidden states are read from it, "
                 "that is wasted GPU time and memory on every call")
    else:
        claim = (f"{unused[0][0]} computes full-vocabulary logits that the function never reads "
                 f"(`{unused[0][1]}`): wasted work on every call")
    yield Finding(
        rule_id="wasted-full-vocab-logits",
        # The code itself shows the waste; its cost is measured only when samples land there (on a GPU the
        # projection runs asynchronously and the thread waits elsewhere).
        severity=Severity.WARNING if measured else Severity.INFO,
        claim=claim,
        evidence=tuple(evidence),
        remedy="Run the target's backbone (model.model) instead of the CausalLM, or pass logits_to_keep=1, "
        "and stop after the last tapped layer: the drafter only needs hidden states.",
        impact=max(share, 0.1),
        stages=(Stage.TARGET,),
    )


_GIB = 2**30
KERNELS_SHOWN = 2


def gpu_side_evidence(ctx: Context) -> list[tuple[str, str]]:
    """What the GPU measured that such a tensor costs: the allocator's throughput and peak per device, the kernel
    trace's longest kernels and the launching threads' GPU time (when a trace was taken)."""
    out: list[tuple[str, str]] = []
    allocator = ctx.probe(ProbeName.ALLOCATOR)
    for device, stats in sorted(sub(allocator, AllocatorKeys.DEVICES).items()):
        rate = num(stats, AllocatorKeys.ALLOCATED_BYTES_PER_S)
        peak = num(stats, AllocatorKeys.ALLOCATED_PEAK_BYTES)
        if rate is None and peak is None:
            continue
        parts = []
        if rate is not None:
            parts.append(f"{rate / _GIB:.1f} GiB/s allocated and freed")
        if peak is not None:
            parts.append(f"peak {peak / _GIB:.1f} GiB allocated")
        out.append((f"cuda:{device} memory (allocator probe)", ", ".join(parts)))
    summary = ctx.kernels
    if summary is not None and summary.top_kernels:
        total = sum(us for _, us, _ in summary.gpu_time_by_thread) or 1.0
        for tid, us, _ in summary.gpu_time_by_thread[:1]:
            out.append(("GPU time launched (kernel trace)", f"{summary.thread_label(tid)} {pct(us / total)}"))
        for kernel in summary.top_kernels[:KERNELS_SHOWN]:
            out.append(("longest kernels (kernel trace)", f"{kernel.name[:60]}: {kernel.count} x "
                                                          f"{kernel.mean_us / 1e3:.2f} ms"))
    return out


def measured_projections(ctx: Context) -> list[Mapping[str, Any]]:
    """The vocabulary projections the allocator probe saw run with autograd off (their output is not trained on),
    biggest output first."""
    allocator = ctx.probe(ProbeName.ALLOCATOR)
    rows = [r for r in items(allocator, AllocatorKeys.VOCAB_PROJECTIONS)
            if isinstance(r, Mapping) and r.get(AllocatorKeys.GRAD) is False and isinstance(r.get(AllocatorKeys.SITE), str)]
    return sorted(rows, key=lambda r: -(num(r, AllocatorKeys.OUTPUT_BYTES) or 0.0))


def _output_text(row: Mapping[str, Any]) -> str:
    """"[4x2048x151936], 2.32 GiB a call": the projection's output as the probe measured it."""
    shape = row.get(AllocatorKeys.SHAPE)
    size = num(row, AllocatorKeys.OUTPUT_BYTES)
    shown = "x".join(str(d) for d in shape) if isinstance(shape, list) else "?"
    return f"[{shown}]" + (f", {size / _GIB:.2f} GiB a call" if size is not None else "")


def _projection_text(row: Mapping[str, Any]) -> str:
    return f"{row.get(AllocatorKeys.SITE)} in {row.get(AllocatorKeys.THREAD)}: {_output_text(row)}"


def _site_unused(row: Mapping[str, Any], unused: list[tuple[str, str]]) -> bool:
    """The probe's site ("dir/file.py:line") is a line the code shows computed and never read ("file.py:line")."""
    site = str(row.get(AllocatorKeys.SITE))
    return any(site.endswith("/" + where) or site == where for where, _ in unused)


def _unused_in_code(ctx: Context) -> list[tuple[str, str]]:
    """(file:line, text) of vocabulary projections the program computes and never reads, in sampled functions."""
    found: dict[str, str] = {}
    for code in ctx.obs.code:
        for line, text_ in code.unused_logits:
            found.setdefault(f"{code.filename.rsplit('/', 1)[-1]}:{line}", text_[:80] or "a vocabulary projection")
    return list(found.items())


def _stack_share(ctx: Context) -> tuple[float, str | None]:
    """Share of the target stage's samples in a vocabulary projection, and where. Only the target's: a model
    that trains on its own logits (the drafter, a plain LM trainer) needs them."""
    rows = ctx.stage_samples(Stage.TARGET)
    hits = 0
    site: str | None = None
    for thread in rows:
        if any(not f.native and (CONSUMES_LOGITS.search(f.name) or any(g in f.filename for g in GENERATION_FILES))
               for f in thread.frames):
            continue  # sampling from the logits: they are used
        frame = next((f for f in thread.frames if not f.native and (
            LOGITS_FRAME.search(f.name) or LOGITS_LINE.search(ctx.line_text(f) or ""))), None)
        if frame is not None:
            hits += 1
            site = site or frame_site(frame)
    return (hits / len(rows) if rows else 0.0), site
