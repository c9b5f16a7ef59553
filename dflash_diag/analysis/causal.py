"""The causal model: link causes to the symptoms they explain, hold back what the window cannot judge, and name
one headline. Pure.

Rules produce three kinds of findings (``model.findings``): *symptoms* (a stage limits throughput, the GPU idles,
the pipeline hangs), *causes* (a recompile storm, a GIL hog, host syncs, a thread that died) and *states* of the
whole process (stopped, zombie, warming up, exited). One pass:

1. a process that cannot run (stopped, zombie, stuck in D) makes every sampled symptom meaningless: they are
   dropped; so are stage verdicts while the process warms up (compiling its first steps), and a bottleneck
   verdict when the pipeline is hung (a dead stage is not a slow one);
2. every symptom gets the causes that explain it, best first: a cause explains a symptom when it slows one of
   the symptom's stages, or the whole process (a GIL hog, host syncs in an unstaged program); a hang is
   explained by the threads that died; a root cause comes before the cause it produces (``ROOT_CAUSES``:
   empty_cache() before the allocator churn it makes);
3. the headline is the most severe of: a process state, a hang with its cause, a wrong-results cause (grad
   None), warm-up, then the symptom with the largest measured impact *because* of its best cause ("the drafter
   stage limits throughput ... because its compiled step keeps recompiling ...; fix: ..."), or with where its
   time goes when no cause is found; else the most important cause alone (with a milder root of it, where
   one was found, as its "because");
4. findings are ranked: the headline's symptom and its causes first, then by severity and measured impact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from dflash_diag.analysis.findings import REGISTRY
from dflash_diag.model import Finding, Headline, Severity
from dflash_diag.model.analysis import PHASE_EXITED, PHASE_HUNG, PHASE_STEADY, PHASE_STOPPED, PHASE_WARMING_UP
from dflash_diag.model.findings import CAUSE, STATE, SYMPTOM

# What explains what is declared by each rule next to its check (``findings._registry.RuleSpec``); these are the
# sets the passes below read, derived once from those declarations.
CANNOT_RUN = frozenset(s.id for s in REGISTRY.values() if s.cannot_run)
# Symptoms read off the stack samples: meaningless while the process cannot run, held back during warm-up.
SAMPLED_SYMPTOMS = frozenset(s.id for s in REGISTRY.values() if s.sampled and s.kind == SYMPTOM)
STAGE_VERDICTS = frozenset(s.id for s in REGISTRY.values() if s.stage_verdict)
# Causes read off sampled shares: only meaningful while the process runs.
SAMPLED_CAUSES = frozenset(s.id for s in REGISTRY.values() if s.sampled and s.kind == CAUSE)
# Causes that say something is wrong but do not slow anything down: never the "because" of a slow stage.
NOT_SLOWDOWNS = frozenset(s.id for s in REGISTRY.values() if not s.slows)
# Symptoms that say nothing moves: only the causes that declare them in ``explains`` explain them.
HANGS = frozenset(s.id for s in REGISTRY.values() if s.hang)
HALTS = frozenset(s.id for s in REGISTRY.values() if s.halts)
UNLINKED = frozenset(s.id for s in REGISTRY.values() if s.unlinked)
EXPLAINS_HANG: dict[str, frozenset[str]] = {s.id: frozenset(s.explains) for s in REGISTRY.values() if s.explains}
# A cause that produces another: when both are found, the root is named first (and leads where the other would):
# empty_cache() after every step hands the blocks back, so every step allocates from the driver again (churn).
ROOT_CAUSES: dict[str, frozenset[str]] = {}
for _spec in REGISTRY.values():
    for _derived in _spec.produces:
        ROOT_CAUSES[_derived] = ROOT_CAUSES.get(_derived, frozenset()) | {_spec.id}
SUPERSEDES: dict[str, frozenset[str]] = {s.id: frozenset(s.supersedes) for s in REGISTRY.values() if s.supersedes}


def link(findings: Sequence[Finding]) -> tuple[tuple[Finding, ...], Headline | None, str]:
    """Linked and ranked findings, the headline and the phase (``model.analysis.PHASE_*``)."""
    kept, phase = _hold_back(list(findings))
    causes = [f for f in kept if f.kind == CAUSE]
    linked: list[Finding] = []
    explains: dict[str, list[str]] = {}
    for f in kept:
        if f.kind != SYMPTOM:
            linked.append(f)
            continue
        because = _roots_first(sorted((c for c in causes if _explains(c, f)), key=_strength))
        for c in because:
            explains.setdefault(c.rule_id + "\0" + c.claim, []).append(f.rule_id)
        linked.append(replace(f, because=tuple(dict.fromkeys(c.rule_id for c in because))))
    present = {c.rule_id for c in causes}
    for derived, roots in ROOT_CAUSES.items():
        for root in roots & present if derived in present else ():
            key = next(c.rule_id + "\0" + c.claim for c in causes if c.rule_id == root)
            explains.setdefault(key, []).append(derived)
    linked = [replace(f, explains=tuple(dict.fromkeys(explains.get(f.rule_id + "\0" + f.claim, ()))))
              if f.kind == CAUSE else f for f in linked]
    headline, lead = _headline(linked)
    return _rank(linked, lead), headline, phase


def _hold_back(findings: list[Finding]) -> tuple[list[Finding], str]:
    ids = {f.rule_id for f in findings}
    if ids & CANNOT_RUN:
        return [f for f in findings if f.rule_id not in SAMPLED_SYMPTOMS | SAMPLED_CAUSES
                and f.rule_id not in ("warming-up", "board-stale")], PHASE_STOPPED
    stuck = [f for f in findings if f.rule_id == "process-uninterruptible" and f.severity >= Severity.CRITICAL]
    if stuck:
        return [f for f in findings if f.rule_id not in SAMPLED_SYMPTOMS | SAMPLED_CAUSES], PHASE_STOPPED
    superseded = {old for new, olds in SUPERSEDES.items() if new in ids for old in olds}
    findings = [f for f in findings if f.rule_id not in superseded]
    if ids & HALTS:
        return [f for f in findings if f.rule_id not in STAGE_VERDICTS], PHASE_HUNG
    if "warming-up" in ids:
        # Rates measured while the first steps compile are not the steady state: stage verdicts are held back,
        # sampled causes (the compiler holds the GIL) become notes to check again after warm-up.
        return [_during_warm_up(f) if f.rule_id in SAMPLED_CAUSES else f
                for f in findings if f.rule_id not in STAGE_VERDICTS], PHASE_WARMING_UP
    if "process-exited" in ids:
        return findings, PHASE_EXITED
    return findings, PHASE_STEADY


def _during_warm_up(f: Finding) -> Finding:
    return replace(f, severity=Severity.INFO, impact=0.0,
                   claim=f"{f.claim} (seen while warming up: look again once the first steps have run)")


def _explains(cause: Finding, symptom: Finding) -> bool:
    if symptom.rule_id in UNLINKED:
        # Where the time goes takes only a cause that declares it, aimed at the root's own stage.
        return symptom.rule_id in EXPLAINS_HANG.get(cause.rule_id, frozenset()) and cause.impact > 0.0 and \
            bool(set(cause.stages) & set(symptom.stages))
    if symptom.rule_id in HANGS:
        return symptom.rule_id in EXPLAINS_HANG.get(cause.rule_id, frozenset())
    if cause.rule_id in NOT_SLOWDOWNS or cause.impact <= 0.0:
        return False
    return not cause.stages or not symptom.stages or bool(set(cause.stages) & set(symptom.stages))


def _roots_first(causes: list[Finding]) -> list[Finding]:
    """``causes`` in order, except that a root cause moves right before the first cause it produces."""
    out = list(causes)
    for derived, roots in ROOT_CAUSES.items():
        at = next((i for i, c in enumerate(out) if c.rule_id == derived), None)
        if at is None:
            continue
        for root in [c for c in out[at + 1:] if c.rule_id in roots]:
            out.remove(root)
            out.insert(at, root)
    return out


def _strength(f: Finding) -> tuple[int, int, float, str]:
    """Sort key, strongest first: severity, a cause aimed at a stage over a process-wide one, impact."""
    return (-int(f.severity), 0 if f.stages else 1, -f.impact, f.rule_id)


def _headline(findings: list[Finding]) -> tuple[Headline | None, list[Finding]]:
    by_id = {f.rule_id: f for f in findings}
    states = sorted((f for f in findings if f.kind == STATE and f.severity >= Severity.CRITICAL), key=_strength)
    if states:
        return _lead(states[0]), [states[0]]
    hang = next((f for f in findings if f.rule_id in HALTS and f.kind == SYMPTOM), None)
    if hang is not None:
        return _with_cause(hang, by_id)
    wrong = sorted((f for f in findings if f.kind == CAUSE and f.severity >= Severity.CRITICAL), key=_strength)
    if wrong:
        return _lead(wrong[0]), [wrong[0]]
    warm = by_id.get("warming-up")
    if warm is not None:
        return _lead(warm), [warm]
    symptoms = sorted((f for f in findings if f.kind == SYMPTOM), key=lambda f: _symptom_rank(f, by_id))
    causes = _roots_first(sorted((f for f in findings if f.kind in (CAUSE, STATE) and f.severity >= Severity.WARNING),
                                 key=_strength))
    if symptoms:
        top = symptoms[0]
        # A symptom leads when a cause explains it, or when no cause as serious stands on its own; a symptom
        # without a cause yields to a cause that is (stale code, a dead thread): that is the thing to act on.
        if not causes or (top.because and _effective(top, by_id) >= causes[0].severity) or (
                not top.because and top.severity > causes[0].severity):
            return _with_cause(top, by_id)
    if causes:
        return _lead_with_root(causes[0], findings)
    return None, []


def _lead_with_root(cause: Finding, findings: list[Finding]) -> tuple[Headline, list[Finding]]:
    """A cause leading alone, with the root that produces it where one was found though milder (``ROOT_CAUSES``: a
    changed value on the GIL holder's hot line under the contention it makes): "<cause>, because <root>", as
    serious as the cause; a root as serious as the cause is already named first (``_roots_first``)."""
    root = next((f for f in findings if f.rule_id in ROOT_CAUSES.get(cause.rule_id, frozenset())
                 and f.kind == CAUSE and f.impact > 0.0 and f.severity < cause.severity), None)
    if root is None:
        return _lead(cause), [cause]
    text = f"{cause.claim}, because {_lower_first(root.claim)}"
    return (Headline(rule_id=cause.rule_id, severity=cause.severity, text=text, remedy=root.remedy,
                     because=(root.rule_id,)), [cause, root])


def _symptom_rank(f: Finding, by_id: dict[str, Finding]) -> tuple[int, int, float]:
    return (-int(_effective(f, by_id)), 0 if f.because else 1, -f.impact)


def _effective(symptom: Finding, by_id: dict[str, Finding]) -> Severity:
    """A symptom is as serious as itself or its most serious cause (a root named first may be the milder)."""
    return max((symptom.severity, *(by_id[r].severity for r in symptom.because if r in by_id)))


def _with_cause(symptom: Finding, by_id: dict[str, Finding]) -> tuple[Headline, list[Finding]]:
    causes = [by_id[r] for r in symptom.because if r in by_id]
    if not causes:
        where = next((value for name, value in symptom.evidence if name.endswith("spends its time in")), None)
        text = symptom.claim + (f"; no cause found, its time goes to: {where}" if where else "")
        return Headline(rule_id=symptom.rule_id, severity=symptom.severity, text=text, remedy=symptom.remedy), [symptom]
    cause = causes[0]
    text = f"{symptom.claim}, because {_lower_first(cause.claim)}"
    # As serious as its most serious cause: a root named first (an information finding) keeps a warning it produces.
    severity = max(symptom.severity, *(c.severity for c in causes))
    return (Headline(rule_id=symptom.rule_id, severity=severity, text=text,
                     remedy=cause.remedy, because=tuple(c.rule_id for c in causes)),
            [symptom, *causes])


def _lead(f: Finding) -> Headline:
    return Headline(rule_id=f.rule_id, severity=f.severity, text=f.claim, remedy=f.remedy)


def _lower_first(text: str) -> str:
    """"The drafter's ..." -> "the drafter's ..."; names (thread names, GIL, CUDA) keep their case."""
    first, _, rest = text.partition(" ")
    return f"{first.lower()} {rest}" if first in ("The", "A", "An", "Activation", "Torch") else text


def _rank(findings: list[Finding], lead: list[Finding]) -> tuple[Finding, ...]:
    first = [f for f in lead if f in findings]
    rest = sorted((f for f in findings if f not in first),
                  key=lambda f: (-int(f.severity), -f.impact, f.rule_id, f.claim))
    return tuple(first + rest)
