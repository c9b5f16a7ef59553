"""Wasted work: the target computes full-vocabulary logits that the drafter never uses."""

from __future__ import annotations

import re
from collections.abc import Iterator

from dflash_diag.analysis.findings._context import Context, frame_site, pct
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

RULES = (RuleSpec("wasted-full-vocab-logits"),)


def check(ctx: Context) -> Iterator[Finding]:
    config = ctx.app_config()
    flags = [k for k in FULL_LOGITS_FLAGS if config.get(k) is True]
    keep = config.get("logits_to_keep")
    if keep == 0 and not isinstance(keep, bool):
        flags.append("logits_to_keep=0")
    share, site = _stack_share(ctx)
    unused = _unused_in_code(ctx)
    if not flags and share < LOGITS_STACK_SHARE and not unused:
        return
    evidence: list[tuple[str, str]] = []
    if flags:
        evidence.append(("config", ", ".join(flags)))
    if site is not None:
        evidence.append(("target samples in logits", f"{pct(share)} ({site})"))
    for where, text_ in unused[:3]:
        evidence.append(("computed, never read", f"{where} `{text_}`"))
    vocab = config.get("vocab_size")
    if isinstance(vocab, int) and not isinstance(vocab, bool):
        evidence.append(("vocab", f"{vocab:,} tokens"))
    measured = bool(flags) or share >= LOGITS_STACK_SHARE
    if measured:
        claim = ("the target stage computes full-vocabulary logits" + (f" ({pct(share)} of its samples at {site})"
                 if site else "") + ": the drafter only needs its hidden states")
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
        frame = next((f for f in thread.frames if not f.native and (
            LOGITS_FRAME.search(f.name) or LOGITS_LINE.search(ctx.line_text(f) or ""))), None)
        if frame is not None:
            hits += 1
            site = site or frame_site(frame)
    return (hits / len(rows) if rows else 0.0), site
