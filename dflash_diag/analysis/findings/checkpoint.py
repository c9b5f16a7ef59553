"""Activation checkpointing: which use_reentrant mode runs, what recompute costs, and parameters left without grad."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from dflash_contract.board import CheckpointKeys, ProbeName
from dflash_diag.analysis.findings._context import (
    Context,
    items,
    lower_bound,
    mean_share,
    num,
    pct,
    stage_samples,
    sub,
)
from dflash_diag.analysis.findings._registry import RuleSpec
from dflash_diag.analysis.stderr import CHECKPOINT_NO_GRAD
from dflash_diag.model import Finding, Severity, Stage, ThreadState
from dflash_diag.model.evidence import is_library_file

# Recompute costs about one extra forward, i.e. ~1/3 of forward+backward when everything is checkpointed;
# more than that (sampled: at one-sigma confidence) is worth knowing. It is not a fault by itself: a model
# whose cost is dominated by a checkpointed vocab projection (the tiny preset) legitimately spends half its
# drafter time there.
RECOMPUTE_INFO_SHARE = 0.35
# What the seed lost time to is the checkpoint machinery's own Python (saved-tensor hooks, reentrant
# bookkeeping) holding the GIL: a stage spending a sixth of its samples there is paying overhead, not compute.
HOOK_WARNING_SHARE = 0.15
_CHECKPOINT_FILES = ("torch/utils/checkpoint.py", "torch/autograd/graph.py")
# graph.py also holds the entry into the autograd engine: a thread inside loss.backward() is in it whether or not
# anything is checkpointed (seen as a false warning on a healthy GPU program), so that frame is compute.
_BACKWARD_ENTRY = frozenset({"_engine_run_backward"})
GRAD_NONE_EXAMPLES = 3

RULES = (
    RuleSpec("checkpoint-grad-none", slows=False),
    RuleSpec("checkpoint-reentrant", slows=False),
    RuleSpec("checkpoint-recompute-heavy", sampled=True),
)


def check(ctx: Context) -> Iterator[Finding]:
    payload = ctx.probe(ProbeName.CHECKPOINT)
    grad_none = list(_grad_none(ctx, payload))
    yield from grad_none
    if payload is not None and (payload.get(CheckpointKeys.CALLS) or grad_none):
        yield from _mode(payload)
    else:
        yield from _mode_from_stacks(ctx)
    yield from _recompute(ctx, payload)


def _calls(payload: Mapping[str, object] | None) -> tuple[float, float]:
    calls = sub(payload, CheckpointKeys.CALLS)
    return num(calls, CheckpointKeys.REENTRANT) or 0.0, num(calls, CheckpointKeys.NON_REENTRANT) or 0.0


def _grad_none(ctx: Context, payload: Mapping[str, object] | None) -> Iterator[Finding]:
    count = num(payload, CheckpointKeys.GRAD_NONE_COUNT)
    names = [n for n in items(payload, CheckpointKeys.GRAD_NONE_PARAMS) if isinstance(n, str)]
    if not count and names:
        count = float(len(names))
    if not count:
        return
    trainable = num(payload, CheckpointKeys.TRAINABLE_PARAMS)
    reentrant, non_reentrant = _calls(payload)
    evidence: list[tuple[str, str]] = [
        ("trainable params with grad None", f"{count:.0f}" + (f" of {trainable:.0f}" if trainable else "")),
    ]
    if names:
        evidence.append(("e.g.", ", ".join(names[:GRAD_NONE_EXAMPLES])))
    evidence.append(("checkpoint calls", f"reentrant {reentrant:.0f}, non-reentrant {non_reentrant:.0f}"))
    steps = num(payload, CheckpointKeys.CHECKED_BACKWARD_STEPS)
    if steps is not None:
        evidence.append(("backward steps checked", f"{steps:.0f}"))
    cause = (
        "use_reentrant=True runs a checkpointed call none of whose tensor inputs requires grad (layers called with "
        "keyword arguments only, or raw inputs such as token ids or images) under no_grad, so no gradient flows"
        if reentrant > 0
        else "their gradients never arrive (frozen by mistake, unused, or cut from the graph)"
    )
    yield Finding(
        rule_id="checkpoint-grad-none",
        severity=Severity.CRITICAL,
        claim=f"{count:.0f} trainable parameters get no gradient: {cause}",
        evidence=tuple(evidence),
        remedy="Use use_reentrant=False (or pass the tensors positionally to the checkpointed function); "
        "training is otherwise silently updating only part of the model.",
        impact=1.0,
    )


def _mode(payload: Mapping[str, object] | None) -> Iterator[Finding]:
    reentrant, non_reentrant = _calls(payload)
    if reentrant <= 0:
        return
    sites = [s for s in items(payload, CheckpointKeys.SITES) if isinstance(s, Mapping) and s.get(CheckpointKeys.USE_REENTRANT) is True]
    evidence: list[tuple[str, str]] = [("reentrant calls", f"{reentrant:.0f}"), ("non-reentrant calls", f"{non_reentrant:.0f}")]
    for site in sites[:3]:
        evidence.append(("reentrant site", f"{site.get('site')} ({site.get('calls')} calls)"))
    yield Finding(
        rule_id="checkpoint-reentrant",
        severity=Severity.INFO,
        claim="activation checkpointing runs with use_reentrant=True"
        + (" (mixed with non-reentrant sites)" if non_reentrant > 0 else ""),
        evidence=tuple(evidence),
        remedy="Fine when every tensor that needs a gradient is passed positionally; with keyword-only calls "
        "(HF/DFlash layers) gradients are lost: watch checkpoint-grad-none. Record the mode when comparing runs.",
        impact=0.0,
    )


_REENTRANT_FRAMES = ("CheckpointFunction.forward", "CheckpointFunction.backward")


def _mode_from_stacks(ctx: Context) -> Iterator[Finding]:
    """Reentrant checkpointing seen from outside: torch's ``CheckpointFunction`` in the stacks."""
    samples = forward = backward = 0
    sites: dict[str, int] = {}
    stages: set[str] = set()
    for stats in ctx.threads:
        for thread, _ in ctx.stats_rows(stats):
            names = [(i, f) for i, f in enumerate(thread.frames) if not f.native and f.name in _REENTRANT_FRAMES
                     and f.filename.endswith(_CHECKPOINT_FILES[0])]
            if not names:
                continue
            samples += 1
            stages.add(stats.stage)
            forward += any(f.name.endswith("forward") for _, f in names)
            backward += any(f.name.endswith("backward") for _, f in names)
            outer = names[-1][0]
            caller = next((f for f in thread.frames[outer + 1:] if not f.native and not is_library_file(f.filename)), None)
            if caller is not None:
                site = f"{caller.short_filename}:{caller.line} ({caller.name})"
                sites[site] = sites.get(site, 0) + 1
    warned = ctx.stderr.checkpoint_no_grad
    if not samples:
        return
    evidence: list[tuple[str, str]] = [("samples in reentrant checkpoint", f"{samples} (forward {forward}, "
                                                                          f"backward recompute {backward})")]
    for site, n in sorted(sites.items(), key=lambda kv: -kv[1])[:3]:
        evidence.append(("checkpoint called at", f"{site}, {n} samples"))
    if warned:
        evidence.append(("stderr", f"torch warned {warned}x: \"{CHECKPOINT_NO_GRAD}\""))
    where = f" at {max(sites, key=lambda k: sites[k])}" if sites else ""
    claim = (f"activation checkpointing runs with use_reentrant=True{where} (torch's CheckpointFunction in the stacks)"
             + (": torch warned that none of its inputs requires grad, so the parameters inside get no gradient"
                if warned else ": with keyword-only tensor arguments its parameters silently get no gradient"))
    yield Finding(
        rule_id="checkpoint-reentrant",
        severity=Severity.WARNING if warned else Severity.INFO,
        claim=claim,
        evidence=tuple(evidence),
        remedy="Pass use_reentrant=False (or pass every tensor positionally to the checkpointed function). To "
        "confirm which parameters get no gradient, run it under `dflash-diag run -- python ...` (the checkpoint "
        "probe checks every parameter's .grad after backward) and run doctor again.",
        impact=0.3 if warned else 0.0,
        stages=tuple(sorted(stages - {Stage.OTHER})),
    )


def _recompute(ctx: Context, payload: Mapping[str, object] | None) -> Iterator[Finding]:
    by_stage: list[tuple[Stage, float, float]] = []
    for stage in (Stage.DRAFTER, Stage.TARGET, Stage.OTHER):
        threads = ctx.stage_threads(stage)
        if threads:
            share = mean_share(threads, ThreadState.CHECKPOINT)
            by_stage.append((stage, share, lower_bound(share, stage_samples(threads))))
    stage, share, sure_share = max(by_stage, key=lambda s: s[2], default=(Stage.DRAFTER, 0.0, 0.0))
    # Sampled only: the checkpoint probe does not time recompute (docs/board.md: no recompute_s is published).
    hook_share, hook_n, hook_site = _hook_share(ctx, stage)
    hook_heavy = lower_bound(hook_share, hook_n) >= HOOK_WARNING_SHARE
    if sure_share < RECOMPUTE_INFO_SHARE and not hook_heavy:
        return
    reentrant, non_reentrant = _calls(payload)
    mode = "saved-tensor hooks (use_reentrant=False)" if non_reentrant > reentrant else "reentrant recompute"
    evidence: list[tuple[str, str]] = []
    if share > 0:
        evidence.append((f"{ctx.names.word(stage)} samples in recompute", pct(share)))
    evidence.append(("checkpoint Python holding the GIL", pct(hook_share) + (f" at {hook_site}" if hook_site else "")))
    if reentrant or non_reentrant:
        evidence.append(("mode", mode))
    who = ctx.names.threads(stage) if stage is not Stage.OTHER else "threads outside the pipeline"
    claim = (f"{who} spend {pct(hook_share)} of their time in checkpoint machinery's own Python"
             if hook_heavy else
             f"{who} spend {pct(share)} of their time in activation-checkpoint recompute")
    yield Finding(
        rule_id="checkpoint-recompute-heavy",
        severity=Severity.WARNING if hook_heavy else Severity.INFO,
        claim=claim,
        evidence=tuple(evidence),
        remedy="Checkpoint fewer/larger regions (e.g. fewer loss chunks), compile the checkpointed region, or "
        "compare use_reentrant modes (saved-tensor hooks cost Python time per chunk under the GIL).",
        impact=share,
        stages=(stage,) if stage is not Stage.OTHER else (),
    )


def _hook_share(ctx: Context, stage: str) -> tuple[float, int, str | None]:
    """Share of the stage's samples running the checkpoint machinery's own Python, holding the GIL.

    From the innermost frame outwards, the first frame that is either checkpoint machinery
    (``torch/utils/checkpoint.py``, ``torch/autograd/graph.py``) or compute (the program's own code, a module's
    ``forward``) decides: the helpers the machinery calls (RNG state, autocast, contextlib) count as machinery.
    """
    members = {t.os_thread_id for t in ctx.stage_threads(stage)}
    total = hits = 0
    site: str | None = None
    for sample in ctx.obs.stacks:
        for thread in sample.threads:
            if thread.os_thread_id not in members:
                continue
            total += 1
            if not thread.owns_gil:
                continue
            for frame in (f for f in thread.frames if not f.native):
                if frame.name in _BACKWARD_ENTRY:
                    break  # the backward pass itself
                if frame.filename.endswith(_CHECKPOINT_FILES):
                    hits += 1
                    site = site or f"{frame.short_filename}:{frame.line} ({frame.name})"
                    break
                if not is_library_file(frame.filename) or "/torch/nn/modules/" in frame.filename:
                    break  # the checkpointed computation itself
    return (hits / total if total else 0.0), total, site
