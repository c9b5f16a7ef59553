"""A job's analysis, the driver beside ``analysis.process``'s: every rank analysed as a process, one summary row per
rank (``analysis.ranks``: where it is, how much of its time it waits on its peers in collectives, where it
computes), the job's own rules (``findings.job``: a straggler, a collective hang, a rank that died, ranks that call
different collectives) and one headline. Pure.

How the findings of the ranks and of the job make one report (docs/jobs.md):

- the job's findings come first, linked by the causal pass with the causes found in the rank they name (the
  straggler's GIL hog explains the straggler);
- a job symptom (a straggler, a hang) says what the other ranks' waits mean: their own symptoms (``wait-chain``,
  ``where-time-goes`` on a collective) are held back, as a stage verdict is beside a hang;
- every other finding of a rank is kept, its claim prefixed with the rank (``rank 2: ...``), and a finding every
  rank makes alike is listed once (``ranks 0-3: ...``);
- without a job finding the headline is the most severe rank's own, prefixed with the rank.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from dflash_diag.analysis.causal import link
from dflash_diag.analysis.findings import JOB_FAMILIES, run_families
from dflash_diag.analysis.findings.job import JobJudgement
from dflash_diag.analysis.mailbox import judge_mailbox
from dflash_diag.analysis.process import analyse_process
from dflash_diag.analysis.ranks import empty_summary, ranks_text, summarise
from dflash_diag.model import Analysis, Finding, Headline, Severity
from dflash_diag.model.analysis import PHASE_EXITED, PHASE_HUNG, PHASE_STEADY
from dflash_diag.model.findings import NOTE, SYMPTOM
from dflash_diag.model.job import JobAnalysis, JobObservation, RankIdentity, RankSummary
from dflash_diag.model.mailbox import MailboxVerdict, MailboxWindow


def analyse_job(job: JobObservation) -> JobAnalysis:
    """Everything the tool can say about a job's window, a pure function of it: each rank judged at the job's
    "now". Never raises (a failing part is an error note)."""
    now = job.judged_at_wall_s
    analyses = tuple(analyse_process(obs if obs.now_wall_s == now else replace(obs, now_wall_s=now)) for obs in job.ranks)
    errors: list[str] = []
    summaries: list[RankSummary] = []
    for identity, obs, analysis in zip(job.topology.ranks, job.ranks, analyses, strict=True):
        try:
            summaries.append(summarise(identity, obs, analysis))
        except Exception as exc:  # an analysis bug is shown, never raised
            errors.append(f"{identity.label}: summary failed: {type(exc).__name__}: {exc}")
            summaries.append(empty_summary(identity, obs))
    verdict = None
    if isinstance(job.mailbox, MailboxWindow):
        try:
            verdict = judge_mailbox(job.mailbox)
        except Exception as exc:  # an analysis bug is shown, never raised
            errors.append(f"the mailbox's judging failed: {type(exc).__name__}: {exc}")
    try:
        findings, headline, phase = _job_findings(job, analyses, tuple(summaries), now, verdict)
    except Exception as exc:
        errors.append(f"job findings failed: {type(exc).__name__}: {exc}")
        findings, headline, phase = _rank_findings_only(job, analyses)
    return JobAnalysis(observation=job, ranks=analyses, summaries=tuple(summaries), findings=findings,
                       headline=headline, phase=phase, errors=tuple(errors), mailbox=verdict)


# --- the findings of the job and of its ranks -------------------------------------------------------------------


def _job_findings(job: JobObservation, analyses: Sequence[Analysis], summaries: tuple[RankSummary, ...],
                  now: float, mailbox: MailboxVerdict | None) -> tuple[tuple[Finding, ...], Headline | None, str]:
    ctx = JobJudgement(job=job, analyses=tuple(analyses), summaries=summaries, now_wall_s=now, mailbox=mailbox)
    own = run_families(ctx, JOB_FAMILIES)
    if not any(f.severity >= Severity.WARNING for f in own):
        findings, headline, phase = _rank_findings_only(job, analyses)
        return _sorted(own) + findings, headline, phase
    culprits = ctx.culprits()
    symptoms = any(f.kind == SYMPTOM for f in own)
    linked_in: list[Finding] = list(own)
    rest: list[Finding] = []
    for identity, analysis in zip(job.topology.ranks, analyses, strict=True):
        for f in analysis.findings:
            if symptoms and f.kind == SYMPTOM:
                continue  # the job's symptom says what this rank's waits mean
            named = _on_rank(f, [identity])
            (linked_in if identity.pid in culprits and f.kind != NOTE else rest).append(named)
    linked, headline, phase = link(linked_in)
    return tuple(linked) + _merged(rest), headline, phase


def _rank_findings_only(job: JobObservation,
                        analyses: Sequence[Analysis]) -> tuple[tuple[Finding, ...], Headline | None, str]:
    """No job finding: each rank's findings (a finding alike on several ranks once), the worst rank's headline."""
    found: list[Finding] = []
    for identity, analysis in zip(job.topology.ranks, analyses, strict=True):
        found.extend(_on_rank(f, [identity]) for f in analysis.findings)
    lead = None
    for identity, analysis in zip(job.topology.ranks, analyses, strict=True):
        h = analysis.headline
        if h is not None and (lead is None or h.severity > lead[1].severity):
            lead = (identity, h)
    headline = None
    if lead is not None:
        identity, h = lead
        headline = replace(h, text=f"{identity.label}: {h.text}")
    phases = {a.phase for a in analyses}
    phase = PHASE_HUNG if PHASE_HUNG in phases else PHASE_EXITED if phases == {PHASE_EXITED} else (
        next(iter(phases)) if len(phases) == 1 else PHASE_STEADY)
    return _merged(found), headline, phase


def _on_rank(f: Finding, ranks: Sequence[RankIdentity]) -> Finding:
    who = ranks[0].label if len(ranks) == 1 else "ranks " + ranks_text([r.rank for r in ranks], [r.pid for r in ranks])
    return replace(f, claim=f"{who}: {f.claim}", evidence=(("rank", _ranks_pids(ranks)), *f.evidence))


def _ranks_pids(ranks: Sequence[RankIdentity]) -> str:
    return ", ".join(f"{r.label} (PID {r.pid})" for r in ranks[:8]) + (f" and {len(ranks) - 8} more" if len(ranks) > 8 else "")


def _merged(findings: list[Finding]) -> tuple[Finding, ...]:
    """One finding per rule id and severity: the first rank's claim, with every rank that made it named."""
    groups: dict[tuple[str, Severity], list[Finding]] = {}
    for f in findings:
        groups.setdefault((f.rule_id, f.severity), []).append(f)
    out = []
    for group in groups.values():
        first = group[0]
        if len(group) == 1:
            out.append(first)
            continue
        labels = [dict(f.evidence).get("rank", "") for f in group]
        claim = first.claim.split(": ", 1)[-1]
        names = [lab.split(" (PID")[0] for lab in labels]
        ranks = [int(n.split()[-1]) if n.startswith("rank ") and n.split()[-1].isdigit() else None for n in names]
        who = "ranks " + ranks_text(ranks, [0] * len(ranks)) if all(r is not None for r in ranks) else ", ".join(names)
        out.append(replace(first, claim=f"{who}: {claim} (alike on {len(group)} ranks)",
                           evidence=(("rank", "; ".join(labels)), *first.evidence[1:]),
                           impact=max(f.impact for f in group)))
    return _sorted(out)


def _sorted(findings: Sequence[Finding]) -> tuple[Finding, ...]:
    return tuple(sorted(findings, key=lambda f: (-int(f.severity), -f.impact, f.rule_id, f.claim)))


__all__ = ["analyse_job"]
