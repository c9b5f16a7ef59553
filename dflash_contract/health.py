"""What the ``health`` probe's readings mean: one judgement for ``doctor``'s findings and for the alerts the program
publishes itself (wandb), so the two never disagree. Standard library only (the probes import it).

- ``training-nonfinite`` (critical): the loss handed to ``backward()`` is NaN/inf, or gradients are non-finite,
  at a sampled step, and the optimizer keeps stepping (a mixed-precision scaler skips such steps: no hook fires).
- ``training-no-update`` (critical): a parameter group's watched weights did not move between samples for at least
  ``MIN_STEPS`` optimizer steps while its learning rate is above 0: it trains nothing. When none of its tensors got
  a gradient, the optimizer steps over tensors the forward does not use (a model copy, re-created modules).
- ``training-lr-zero`` (warning): a group's learning rate has been 0 for ``MIN_LR_ZERO_STEPS`` steps (a warm-up
  that starts at 0 rises long before that).

Frozen parameters are in no optimizer (or have ``requires_grad=False``): never judged. Steps without a gradient at
all (an optimizer stepped before any backward) count as nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dflash_contract.board import HealthKeys

MIN_STEPS = 10
MIN_LR_ZERO_STEPS = 50
_GROUPS_SHOWN = 3


@dataclass(frozen=True, slots=True)
class Verdict:
    rule_id: str
    critical: bool
    claim: str
    evidence: tuple[tuple[str, str], ...]
    remedy: str


def judge(payload: Mapping[str, Any] | None, now_wall_s: float) -> list[Verdict]:
    """The verdicts a ``health`` payload supports; [] for none (or an unreadable payload)."""
    if not isinstance(payload, Mapping) or payload.get("status") != "ok":
        return []
    steps = _int(payload.get(HealthKeys.STEPS)) or 0
    groups = [g for g in payload.get(HealthKeys.GROUPS) or () if isinstance(g, Mapping)]
    out = []
    bad = _nonfinite(payload, groups, steps, now_wall_s)
    if bad is not None:
        out.append(bad)
    still = _no_update(groups, steps)
    if still is not None:
        out.append(still)
    lr = _lr_zero(groups, steps)
    if lr is not None:
        out.append(lr)
    return out


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _nonfinite(payload: Mapping[str, Any], groups: list[Mapping[str, Any]], steps: int,
               now_wall_s: float) -> Verdict | None:
    since = _int(payload.get(HealthKeys.LOSS_NONFINITE_SINCE_STEP))
    grad_since = _int(payload.get(HealthKeys.GRAD_NONFINITE_SINCE_STEP))
    bad_tensors = sum(_int(g.get(HealthKeys.GRAD_NONFINITE)) or 0 for g in groups)
    if since is None and (grad_since is None or not bad_tensors):
        return None
    parts = []
    evidence: list[tuple[str, str]] = []
    if since is not None:
        wall = _num(payload.get(HealthKeys.LOSS_NONFINITE_SINCE_WALL_S))
        ago = f" ({max(0.0, now_wall_s - wall):.0f} s ago)" if wall is not None else ""
        parts.append(f"the loss is {payload.get(HealthKeys.LOSS)} since step {since}{ago}")
        evidence.append(("loss", f"{payload.get(HealthKeys.LOSS)} since step {since}{ago}"))
    if bad_tensors:
        parts.append(f"gradients are non-finite in {bad_tensors} tensors"
                     + (f" since step {grad_since}" if grad_since is not None else ""))
        evidence.append(("non-finite gradients", f"{bad_tensors} tensors at step "
                         f"{payload.get(HealthKeys.LAST_SAMPLE_STEP)}"))
    evidence.append(("optimizer steps so far", str(steps)))
    return Verdict(
        rule_id="training-nonfinite", critical=True,
        claim="training on garbage: " + "; ".join(parts) + f"; the optimizer keeps stepping (step {steps})",
        evidence=tuple(evidence),
        remedy="Stop and find the first bad step: lower the learning rate or add warm-up, clip gradients "
               "(torch.nn.utils.clip_grad_norm_), check the data for NaN/inf and divisions by zero in the loss; "
               "with fp16 use a GradScaler, which skips the steps whose gradients overflow.")


def _no_update(groups: list[Mapping[str, Any]], steps: int) -> Verdict | None:
    stuck = []
    for g in groups:
        since = _int(g.get(HealthKeys.UNCHANGED_SINCE_STEP))
        lr = _num(g.get(HealthKeys.LR))
        if since is None or steps - since < MIN_STEPS or lr is None or lr <= 0.0:
            continue
        stuck.append((g, since))
    if not stuck:
        return None
    names = ", ".join(str(g.get(HealthKeys.GROUP)) for g, _ in stuck[:_GROUPS_SHOWN])
    first = min(since for _, since in stuck)
    why = _why_stuck([g for g, _ in stuck])
    evidence = []
    for g, since in stuck[:_GROUPS_SHOWN]:
        evidence.append((f"group {g.get(HealthKeys.GROUP)}",
                         f"weights unchanged since step {since}, lr {g.get(HealthKeys.LR)}, "
                         f"{g.get(HealthKeys.GRAD_NONE)} of {g.get(HealthKeys.TENSORS)} tensors without a gradient, "
                         f"{g.get(HealthKeys.GRAD_ZERO)} with an all-zero one"))
    return Verdict(
        rule_id="training-no-update", critical=True,
        claim=f"{len(stuck)} of {len(groups)} parameter groups do not train: their watched weights (slices spread "
              f"over each group) have not changed in {steps - first} optimizer steps ({names}){why}",
        evidence=tuple(evidence),
        remedy="Make the optimizer hold the parameters the forward uses: build it after the model is final (after "
               ".to(device), wrapping, re-creating modules, loading a checkpoint into a new object), check "
               "requires_grad and that no torch.no_grad()/detach() cuts the loss from these weights.")


def _why_stuck(groups: list[Mapping[str, Any]]) -> str:
    tensors = sum(_int(g.get(HealthKeys.TENSORS)) or 0 for g in groups)
    none = sum(_int(g.get(HealthKeys.GRAD_NONE)) or 0 for g in groups)
    zero = sum(_int(g.get(HealthKeys.GRAD_ZERO)) or 0 for g in groups)
    if tensors and none == tensors:
        return ("; none of their tensors gets a gradient: the optimizer steps over tensors the forward does not use "
                "(a model copy, or modules re-created after the optimizer was built)")
    if tensors and zero + none == tensors:
        return "; every gradient is zero: the loss does not depend on these weights"
    if none:
        return f"; {none} of their {tensors} tensors get no gradient (cut from the graph, or not used in the forward)"
    return ""


def _lr_zero(groups: list[Mapping[str, Any]], steps: int) -> Verdict | None:
    zero = [(g, since) for g in groups if (since := _int(g.get(HealthKeys.LR_ZERO_SINCE_STEP))) is not None
            and steps - since >= MIN_LR_ZERO_STEPS]
    if not zero:
        return None
    names = ", ".join(str(g.get(HealthKeys.GROUP)) for g, _ in zero[:_GROUPS_SHOWN])
    first = min(since for _, since in zero)
    return Verdict(
        rule_id="training-lr-zero", critical=False,
        claim=f"the learning rate is 0 in {len(zero)} parameter groups ({names}) for {steps - first} steps: they "
              "do not train",
        evidence=tuple((f"group {g.get(HealthKeys.GROUP)}", f"lr 0 since step {since}") for g, since in zero[:3]),
        remedy="Check the schedule (a warm-up that never starts, a scheduler stepped per epoch instead of per step, "
               "a scheduler built for another optimizer) and the lr the optimizer was given.")
