"""A job's analysis: every rank analysed as a process (``analyse``), one summary row per rank (where it is, how much
of its time it waits on its peers in collectives, where it computes), the job's own rules (``findings.job``: a
straggler, a collective hang, a rank that died, ranks that call different collectives) and one headline. Pure.

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

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from dflash_contract.board import CollectivesKeys, HealthKeys, ProbeName
from dflash_diag.analysis.collectives import collective_op, program_site
from dflash_diag.analysis.hotspots import hot_functions
from dflash_diag.analysis.process import analyse_process
from dflash_diag.analysis.threads import thread_identity
from dflash_diag.model import Analysis, Finding, Headline, Observation, Severity, ThreadSample, ThreadState
from dflash_diag.model.analysis import PHASE_EXITED, PHASE_HUNG, PHASE_STEADY
from dflash_diag.model.findings import NOTE, SYMPTOM
from dflash_diag.model.job import (
    CollectiveWait,
    JobAnalysis,
    JobObservation,
    ProbeCollective,
    RankIdentity,
    RankSummary,
)
from dflash_diag.model.waits import WaitGraph

_TOOL_THREADS = ("dflash-diag-",)
MAX_RECENT = 64  # rows of one board's recent collectives read (the probe writes 32)
MAX_RECENT_KEPT = 2048  # over every board of the window
_WORK = frozenset({ThreadState.PYTHON, ThreadState.NATIVE, ThreadState.COMPILE, ThreadState.CHECKPOINT})
Row = tuple[ThreadSample, ThreadState]


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
            summaries.append(_empty_summary(identity, obs))
    try:
        findings, headline, phase = _job_findings(job, analyses, tuple(summaries), now)
    except Exception as exc:
        errors.append(f"job findings failed: {type(exc).__name__}: {exc}")
        findings, headline, phase = _rank_findings_only(job, analyses)
    return JobAnalysis(observation=job, ranks=analyses, summaries=tuple(summaries), findings=findings,
                       headline=headline, phase=phase, errors=tuple(errors))


# --- one rank's row ----------------------------------------------------------------------------------------------


def rank_rows(obs: Observation, analysis: Analysis) -> dict[str, list[Row]]:
    """Every sampled thread's samples with their states, in time order, by thread name (tool threads left out)."""
    by_id = {t.os_thread_id: t for t in analysis.threads if t.os_thread_id is not None}
    by_name = {t.name: t for t in analysis.threads if t.os_thread_id is None}
    cursor: dict[int, int] = {}
    out: dict[str, list[Row]] = {}
    for sample in sorted(obs.stacks, key=lambda s: s.monotonic_s):
        for thread in sample.threads:
            stats = by_id.get(thread.os_thread_id) if thread.os_thread_id is not None else by_name.get(thread.name or "")
            if stats is None or stats.name.startswith(_TOOL_THREADS):
                continue
            ident = thread_identity(thread)
            i = cursor.get(ident, 0)
            if i < len(stats.timeline):
                out.setdefault(stats.name, []).append((thread, stats.timeline[i]))
                cursor[ident] = i + 1
    return out


def summarise(identity: RankIdentity, obs: Observation, analysis: Analysis) -> RankSummary:
    rows = rank_rows(obs, analysis)
    lines = obs.line_text
    ops = {name: [collective_op(t, lines) for t, _ in rs] for name, rs in rows.items()}
    thread = _training_thread(rows, ops)
    mine, my_ops = rows.get(thread, []), ops.get(thread, [])
    n = len(mine)
    in_coll = [op is not None for op in my_ops]
    waits: Counter[tuple[str, str]] = Counter((op, program_site(t)) for (t, _), op in zip(mine, my_ops, strict=True)
                                              if op is not None)
    collective = None
    if waits:
        (op, site), count = waits.most_common(1)[0]
        collective = CollectiveWait(op=op, site=site, share=count / n)
    now = None
    if mine and my_ops[-1] is not None:
        now = CollectiveWait(op=my_ops[-1] or "", site=program_site(mine[-1][0]), share=1.0)
    outside = [(t, s) for (t, s), c in zip(mine, in_coll, strict=True) if not c]
    spots = hot_functions(outside, n=2) if outside else ()
    # Shares of all the thread's samples (hot_functions divides by the rows it was given).
    scale = len(outside) / n if n else 0.0
    hot = ", ".join(f"{s.function} ({s.site}) {100.0 * s.share * scale:.0f}%" for s in spots)
    board = obs.board
    return RankSummary(
        identity=identity, alive=obs.process_alive, n_samples=n, thread=thread,
        collective_share=sum(in_coll) / n if n else 0.0, collective=collective, now=now,
        computing_share=sum(1 for (_, s), c in zip(mine, in_coll, strict=True) if s in _WORK and not c) / n if n else 0.0,
        hot=hot if spots else "", where=program_site(mine[-1][0]) if mine else "",
        progress=analysis.waits.progress if isinstance(analysis.waits, WaitGraph) else bool(obs.stacks),
        step=_step(board.session if board is not None else {}, board.probe(ProbeName.HEALTH) if board else None),
        probe=probe_collective(obs), headline=analysis.headline.text if analysis.headline else "",
        severity=analysis.headline.severity if analysis.headline else None, cpu_pct=cpu_pct(obs),
        workers=len({s.pid for s in obs.children}), exited=bool(obs.stacks) and not obs.process_alive)


def _empty_summary(identity: RankIdentity, obs: Observation) -> RankSummary:
    return RankSummary(identity=identity, alive=obs.process_alive, n_samples=0, thread="", collective_share=0.0,
                       collective=None, now=None, computing_share=0.0, hot="", where="", progress=False, step=None,
                       probe=None, headline="", severity=None, cpu_pct=None, workers=0)


def _training_thread(rows: Mapping[str, list[Row]], ops: Mapping[str, list[str | None]]) -> str:
    """The thread that makes the collective calls; else the one that works most; else MainThread."""
    if not rows:
        return ""
    in_coll = {name: sum(1 for op in ops[name] if op is not None) for name in rows}
    if max(in_coll.values()) > 0:
        return max(rows, key=lambda name: (in_coll[name], len(rows[name]), name == "MainThread"))
    working = {name: sum(1 for _, s in rs if s in _WORK) for name, rs in rows.items()}
    return max(rows, key=lambda name: (name == "MainThread" and working[name] > 0, working[name], len(rows[name])))


def _step(session: Mapping[str, Any], health: Mapping[str, Any] | None) -> int | None:
    """The rank's step: the program's own (``session.step``), else the optimizer steps the health probe counted."""
    for value in (session.get("step"), (health or {}).get(HealthKeys.STEPS)):
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


def cpu_pct(obs: Observation) -> float | None:
    """% of one core the process used between the first and last /proc readings of the window."""
    sweeps = [s for s in obs.proc if s]
    if len(sweeps) < 2:
        return None
    first, last = sweeps[0], sweeps[-1]
    dt = last[0].monotonic_s - first[0].monotonic_s
    if dt <= 0.5:
        return None
    before = {t.tid: t.run_ns for t in first}
    return 100.0 * sum(max(0, t.run_ns - before[t.tid]) for t in last if t.tid in before) / 1e9 / dt


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0 else None


def probe_collective(obs: Observation) -> ProbeCollective | None:
    """The ``collectives`` probe's newest readings (and how many calls the window saw), validated."""
    board = obs.board
    payload = board.probe(ProbeName.COLLECTIVES) if board is not None else None
    if not isinstance(payload, Mapping) or payload.get(CollectivesKeys.ARMED) is not True:
        return None
    entered, completed = _int(payload.get(CollectivesKeys.ENTERED)), _int(payload.get(CollectivesKeys.COMPLETED))
    if entered is None or completed is None:
        return None
    current = payload.get(CollectivesKeys.CURRENT)
    row = current[0] if isinstance(current, list) and current and isinstance(current[0], Mapping) else {}
    since = _float(row.get(CollectivesKeys.SINCE_WALL_S))
    last = payload.get(CollectivesKeys.LAST)
    first_board = obs.boards[0] if isinstance(obs.boards, tuple) and obs.boards else None
    first = first_board.probe(ProbeName.COLLECTIVES) if first_board is not None else None
    first_entered = _int(first.get(CollectivesKeys.ENTERED)) if isinstance(first, Mapping) else None
    backend = payload.get(CollectivesKeys.BACKEND)
    recent: dict[int, str] = {}
    for b in obs.boards if isinstance(obs.boards, tuple) else ():
        rows = (b.probe(ProbeName.COLLECTIVES) or {}).get(CollectivesKeys.RECENT)
        for entry in rows[:MAX_RECENT] if isinstance(rows, list) else ():
            seq = _int(entry.get(CollectivesKeys.SEQ)) if isinstance(entry, Mapping) else None
            name = entry.get(CollectivesKeys.OP) if isinstance(entry, Mapping) else None
            if seq is not None and isinstance(name, str) and len(recent) < MAX_RECENT_KEPT:
                recent[seq] = name[:64]
    op = row.get(CollectivesKeys.OP)
    last_op = last.get(CollectivesKeys.OP) if isinstance(last, Mapping) else None
    return ProbeCollective(
        entered=entered, completed=completed,
        current_op=op if isinstance(op, str) else None, current_seq=_int(row.get(CollectivesKeys.SEQ)),
        current_for_s=max(0.0, board.wall_time_s - since) if since is not None and board is not None else None,
        last_op=last_op if isinstance(last_op, str) else None,
        in_collectives_s=_float(payload.get(CollectivesKeys.IN_COLLECTIVES_S)),
        backend=backend if isinstance(backend, str) else None,
        entered_in_window=entered - first_entered if first_entered is not None and entered >= first_entered else None,
        recent=tuple(sorted(recent.items())), from_start=payload.get(CollectivesKeys.FROM_START) is True)


# --- the findings of the job and of its ranks -------------------------------------------------------------------


def _job_findings(job: JobObservation, analyses: Sequence[Analysis], summaries: tuple[RankSummary, ...],
                  now: float) -> tuple[tuple[Finding, ...], Headline | None, str]:
    from dflash_diag.analysis.causal import link
    from dflash_diag.analysis.findings import JOB_FAMILIES, run_families
    from dflash_diag.analysis.findings.job import JobContext

    ctx = JobContext(job=job, analyses=tuple(analyses), summaries=summaries, now_wall_s=now)
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


def ranks_text(ranks: Sequence[int | None], pids: Sequence[int] = ()) -> str:
    """``0-3``, ``0, 2``, or PIDs for processes without a RANK."""
    known = sorted(r for r in ranks if r is not None)
    if len(known) != len(ranks):
        return ", ".join(str(r) if r is not None else f"PID {p}" for r, p in zip(ranks, pids, strict=False))
    if len(known) >= 3 and known == list(range(known[0], known[-1] + 1)):
        return f"{known[0]}-{known[-1]}"
    return ", ".join(str(r) for r in known)


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


__all__ = ["analyse_job", "cpu_pct", "probe_collective", "rank_rows", "ranks_text", "summarise"]
