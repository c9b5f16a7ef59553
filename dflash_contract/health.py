"""What the ``health`` probe's readings mean: one judgement for ``doctor``'s findings and for the alerts the program
publishes itself (wandb), so the two never disagree. Standard library only (the probes import it).

- ``training-nonfinite`` (critical): the loss handed to ``backward()`` is NaN/inf, or gradients are non-finite,
  at a sampled step, and the optimizer keeps stepping (a mixed-precision scaler skips such steps: no hook fires).
- ``training-no-update`` (critical): in a parameter group whose learning rate is above 0, tensors holding at least
  ``STUCK_SHARE`` of its watched weights have not trained for at least ``MIN_STEPS`` steps of their own optimizer:
  their weights did not change between samples although the step after the earlier sample had something to apply
  where they were compared (no gradient at all, an all-zero one, or a non-zero one there), or the optimizer's
  running average of their squared gradients is exactly zero (every gradient zero: weight decay alone still moves
  them), over every step that optimizer applied to them by its own count (Adam's ``state["step"]``: attached to a
  program that has trained a while, its history counts, so a slow box need not see ``MIN_STEPS`` more steps in a
  short window). When none of them gets a gradient, the optimizer
  steps over tensors the forward does not use (a model copy, re-created modules) or the graph is cut before them.
  Or: every group the optimizers step holds only tensors that do not require grad (frozen after the optimizer was
  built), and no group trains. Or: backward() runs (``MIN_NO_STEP_BACKWARDS`` calls, a second or more) in a
  process that built an optimizer, none steps, and none of the tensors the loss depends on changes while their
  gradients are cleared every iteration (a step() that never runs, a GradScaler that skips every step).
- ``training-lr-zero`` (warning): a group's learning rate has been 0 for ``MIN_LR_ZERO_STEPS`` steps (a warm-up
  that starts at 0 rises long before that).

Frozen parameters (in no optimizer, or ``requires_grad=False`` beside trainable ones) are never judged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dflash_contract.board import HealthKeys

MIN_STEPS = 10
MIN_LR_ZERO_STEPS = 50
MIN_NO_STEP_BACKWARDS = 20  # backward() calls without an optimizer step, at two looks 1 s apart or more
# A group does not train when at least this share of its watched weights (by element count) stays unchanged: a few
# unused tensors (a pooler no loss reads) are not the failure; a stage, a model, or a whole group is.
STUCK_SHARE = 0.10
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
    raw_groups = payload.get(HealthKeys.GROUPS)
    groups = [g for g in raw_groups if isinstance(g, Mapping)] if isinstance(raw_groups, list) else []
    out = []
    bad = _nonfinite(payload, groups, steps, now_wall_s)
    if bad is not None:
        out.append(bad)
    still = _no_update(groups, steps)
    if still is None:
        still = _no_step(payload)
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
    stuck = [g for g in groups if stuck_share(g) >= STUCK_SHARE and (_num(g.get(HealthKeys.LR)) or 0.0) > 0.0]
    frozen = [g for g in groups if (since := _int(g.get(HealthKeys.FROZEN_SINCE_STEP))) is not None
              and _seen_at(g, steps) - since >= MIN_STEPS]
    trains = [g for g in groups if (_int(g.get(HealthKeys.TENSORS)) or 0) > 0 and g not in stuck]
    if trains:
        frozen = []  # an optimizer over frozen tensors beside one that trains: a phase of the schedule, not a fault
    if not stuck and not frozen:
        return None
    parts = []
    evidence = []
    if stuck:
        parts.append(_stuck_claim(stuck, groups, steps))
        for g in stuck[:_GROUPS_SHOWN]:
            evidence.append((f"group {g.get(HealthKeys.GROUP)}",
                             f"{g.get(HealthKeys.STUCK_TENSORS)} of {g.get(HealthKeys.WATCHED_TENSORS)} watched tensors "
                             f"not training {_since(g, steps)} (weights unchanged, or "
                             f"only zero gradients; lr {g.get(HealthKeys.LR)}); "
                             f"at the last sample {g.get(HealthKeys.STUCK_GRAD_NONE)} of them had no gradient, "
                             f"{g.get(HealthKeys.STUCK_GRAD_ZERO)} an all-zero one; e.g. "
                             + ", ".join(str(x) for x in g.get(HealthKeys.STUCK_EXAMPLES) or ())))
    if frozen:
        held = sum(_int(g.get(HealthKeys.FROZEN)) or 0 for g in frozen)
        names = ", ".join(str(g.get(HealthKeys.GROUP)) for g in frozen[:_GROUPS_SHOWN])
        parts.append(f"the optimizer steps over {held} tensors none of which requires grad ({names}): it updates "
                     "nothing, and what does get gradients (modules added or unfrozen after it was built, adapters) "
                     "is in no optimizer")
        evidence.extend((f"group {g.get(HealthKeys.GROUP)}", f"{g.get(HealthKeys.FROZEN)} tensors, all with "
                         f"requires_grad=False, since step {g.get(HealthKeys.FROZEN_SINCE_STEP)}")
                        for g in frozen[:_GROUPS_SHOWN])
    evidence.append(("optimizer steps so far", str(steps)))
    return Verdict(
        rule_id="training-no-update", critical=True,
        claim="; ".join(parts),
        evidence=tuple(evidence),
        remedy="Make the optimizer hold the parameters the forward uses: build it after the model is final (after "
               "re-creating or loading it into a new object, deepcopy, .to(), weight_norm/parametrizations, adapter "
               "injection), check requires_grad, and that no torch.no_grad()/detach()/reentrant checkpoint whose "
               "inputs do not require grad cuts the loss from these weights; call zero_grad() before backward(), "
               "not between backward() and step(); a zero gate or mask makes every gradient zero.")


def _no_step(payload: Mapping[str, Any]) -> Verdict | None:
    """backward() runs, no optimizer steps, and nothing the loss depends on changes though its gradients are cleared
    every iteration: a step() that never runs, or a GradScaler that skips every step."""
    idle = payload.get(HealthKeys.NO_STEP)
    if not isinstance(idle, Mapping):
        return None
    tensors = _int(idle.get(HealthKeys.NO_STEP_TENSORS)) or 0
    backwards = _int(idle.get(HealthKeys.NO_STEP_BACKWARDS)) or 0
    seconds = _num(idle.get(HealthKeys.NO_STEP_SECONDS)) or 0.0
    # A program that steps every few seconds (long accumulation) pauses that long normally: three times its longest
    # gap between two steps, at least a second.
    usual_gap_s = _num(idle.get(HealthKeys.NO_STEP_LONGEST_GAP_S)) or 0.0
    if not (tensors and idle.get(HealthKeys.NO_STEP_UNCHANGED) == tensors and idle.get(HealthKeys.NO_STEP_CLEARED)
            is True and backwards >= MIN_NO_STEP_BACKWARDS and seconds >= max(1.0, 3 * usual_gap_s)):
        return None
    loss = idle.get(HealthKeys.NO_STEP_LOSS)
    bad_loss = isinstance(loss, str)  # a non-finite loss is published as its name ("nan", "inf")
    why = (f"the loss is {loss}: a GradScaler skips every step whose gradients are not finite, and the scale "
           "collapses" if bad_loss else "no optimizer.step() runs (removed, or behind a condition that never "
           "holds), or a GradScaler skips every step")
    return Verdict(
        rule_id="training-no-update", critical=True,
        claim=f"nothing trains: backward() ran {backwards} times in {seconds:.0f} s without an optimizer step, and "
              f"none of the {tensors} tensors the loss depends on changed ({why})",
        evidence=(("backward() without a step", f"{backwards} calls in {seconds:.1f} s"),
                  ("tensors the loss depends on", f"{tensors}, all unchanged, gradients cleared every iteration"),
                  ("optimizer steps so far", str(_int(payload.get(HealthKeys.STEPS)) or 0))),
        remedy="Call optimizer.step() after backward() (scaler.step(optimizer) with a GradScaler); with fp16, a "
               "loss that is NaN or inf at every step makes the scaler skip them all: find where it turns "
               "non-finite.")


def stuck_share(g: Mapping[str, Any]) -> float:
    """The share of a group row's watched weights (by element count) that do not train (0 when none are watched)."""
    watched = _int(g.get(HealthKeys.WATCHED_NUMEL)) or 0
    stuck = _int(g.get(HealthKeys.STUCK_NUMEL)) or 0
    return stuck / watched if watched > 0 else 0.0


def _stuck_claim(stuck: list[Mapping[str, Any]], groups: list[Mapping[str, Any]], steps: int) -> str:
    tensors = sum(_int(g.get(HealthKeys.STUCK_TENSORS)) or 0 for g in stuck)
    watched = sum(_int(g.get(HealthKeys.WATCHED_TENSORS)) or 0 for g in stuck)
    numel = sum(_int(g.get(HealthKeys.STUCK_NUMEL)) or 0 for g in stuck)
    of_numel = sum(_int(g.get(HealthKeys.WATCHED_NUMEL)) or 0 for g in stuck)
    # Each group over its own optimizer's steps (a process with several optimizers counts them all in `steps`).
    span = max(_stuck_steps(g, steps) for g in stuck)
    names = ", ".join(str(g.get(HealthKeys.GROUP)) for g in stuck[:_GROUPS_SHOWN])
    share = f"{100 * numel / of_numel:.0f}% of the weights" if of_numel else "their weights"
    return (f"{tensors} of {watched} tensors ({share}) in {len(stuck)} of {len(groups)} parameter groups have not "
            f"trained in {span} optimizer steps ({names}){_why_stuck(stuck)}")


def _why_stuck(groups: list[Mapping[str, Any]]) -> str:
    tensors = sum(_int(g.get(HealthKeys.STUCK_TENSORS)) or 0 for g in groups)
    none = sum(_int(g.get(HealthKeys.STUCK_GRAD_NONE)) or 0 for g in groups)
    zero = sum(_int(g.get(HealthKeys.STUCK_GRAD_ZERO)) or 0 for g in groups)
    known = [_int(g.get(HealthKeys.STUCK_NONE_IN_GRAPH)) for g in groups if _int(g.get(HealthKeys.STUCK_GRAD_NONE))]
    in_graph = sum(k for k in known if k is not None) if known and all(k is not None for k in known) else None
    if tensors and none == tensors:
        if in_graph == none:
            return ("; they get no gradient at the step although the loss's graph reaches them: their gradients are "
                    "cleared between backward() and step() (zero_grad() after backward, or a hook that drops them)")
        where = "they get no gradient" + (" and the loss's autograd graph does not reach them" if in_graph == 0 else "")
        return (f"; {where}: the optimizer steps over tensors the forward does not use (a model copy, modules "
                "re-created or re-parametrized after the optimizer was built) or the graph is cut before them "
                "(no_grad, detach, reentrant checkpointing whose inputs do not require grad)")
    if tensors and zero == tensors:
        return ("; every gradient of theirs is exactly zero: the loss does not depend on them (a zero gate, an "
                "all-zero mask)")
    if none or zero:
        return f"; {none} of them get no gradient, {zero} an all-zero one"
    return ""


def _stuck_steps(g: Mapping[str, Any], steps: int) -> int:
    """How many of its optimizer's steps a group's stuck tensors have not trained in."""
    since = _int(g.get(HealthKeys.STUCK_SINCE_STEP))
    return _seen_at(g, steps) - since if since is not None else 0


def _since(g: Mapping[str, Any], steps: int) -> str:
    """Since when a group's stuck tensors have not trained. A step below 1 comes from the optimizer's own count of
    the steps it applied before the probe's first sample (attached to a running program): every one of them."""
    since = _int(g.get(HealthKeys.STUCK_SINCE_STEP))
    if since is None or since >= 1:
        return f"since step {since}"
    return (f"in any of the {_stuck_steps(g, steps)} steps their optimizer applied (its own count, from before the "
            "probe's first sample)")


def _seen_at(g: Mapping[str, Any], steps: int) -> int:
    """The step a group's reading was taken at: a state is judged over the steps it was seen in, never over the
    steps the process made since its last sample (a warm-up's lr 0 at step 1 is not 0 for the 60 steps before the
    next sample)."""
    sampled = _int(g.get(HealthKeys.SAMPLED_STEP))
    return sampled if sampled is not None else steps


def _lr_zero(groups: list[Mapping[str, Any]], steps: int) -> Verdict | None:
    zero = [(g, since) for g in groups if (since := _int(g.get(HealthKeys.LR_ZERO_SINCE_STEP))) is not None
            and _seen_at(g, steps) - since >= MIN_LR_ZERO_STEPS]
    if not zero:
        return None
    names = ", ".join(str(g.get(HealthKeys.GROUP)) for g, _ in zero[:_GROUPS_SHOWN])
    span = max(_seen_at(g, steps) - since for g, since in zero)
    return Verdict(
        rule_id="training-lr-zero", critical=False,
        claim=f"the learning rate is 0 in {len(zero)} parameter groups ({names}) for {span} steps: they "
              "do not train",
        evidence=tuple((f"group {g.get(HealthKeys.GROUP)}", f"lr 0 since step {since}") for g, since in zero[:3]),
        remedy="Check the schedule (a warm-up that never starts, a scheduler stepped per epoch instead of per step, "
               "a scheduler built for another optimizer) and the lr the optimizer was given.")
