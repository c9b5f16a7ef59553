"""Wasted work: the target computes full-vocabulary logits that the drafter never uses."""

from __future__ import annotations

import re
from collections.abc import Iterator

from dflash_diag.analysis.findings._context import Context, frame_site, pct, thread_stage
from dflash_diag.model import Finding, Severity

# Function names of a vocabulary projection; the target only needs hidden states (dflash-domain.md section 0.3).
LOGITS_FRAME = re.compile(r"lm_head|logits", re.IGNORECASE)
# Config flags of the app that turn the full-vocab target forward on; `logits_to_keep` 0 means "all positions".
FULL_LOGITS_FLAGS = ("target_full_logits", "full_logits", "compute_target_logits", "target_logits")
# Any steady share of target samples in a logits projection is waste; 5% keeps a one-off sample from alarming.
LOGITS_STACK_SHARE = 0.05


def check(ctx: Context) -> Iterator[Finding]:
    config = ctx.app_config()
    flags = [k for k in FULL_LOGITS_FLAGS if config.get(k) is True]
    keep = config.get("logits_to_keep")
    if keep == 0 and not isinstance(keep, bool):
        flags.append("logits_to_keep=0")
    share, site = _stack_share(ctx)
    if not flags and share < LOGITS_STACK_SHARE:
        return
    evidence: list[tuple[str, str]] = []
    if flags:
        evidence.append(("config", ", ".join(flags)))
    if site is not None:
        evidence.append(("target samples in logits", f"{pct(share)} ({site})"))
    vocab = config.get("vocab_size")
    if isinstance(vocab, int) and not isinstance(vocab, bool):
        evidence.append(("vocab", f"{vocab:,} tokens"))
    yield Finding(
        rule_id="wasted-full-vocab-logits",
        severity=Severity.WARNING,
        claim="the target computes full-vocabulary logits that are thrown away",
        evidence=tuple(evidence),
        remedy="Run the target's backbone (model.model) instead of the CausalLM, or pass logits_to_keep=1, "
        "and stop after the last tapped layer: the drafter only needs hidden states.",
        impact=max(share, 0.1),
    )


def _stack_share(ctx: Context) -> tuple[float, str | None]:
    total = hits = 0
    site: str | None = None
    for sample in ctx.obs.stacks:
        for thread in sample.threads:
            if thread_stage(ctx, thread) != "target":
                continue
            total += 1
            frame = next((f for f in thread.frames if not f.native and LOGITS_FRAME.search(f.name)), None)
            if frame is not None:
                hits += 1
                site = site or frame_site(frame)
    return (hits / total if total else 0.0), site


