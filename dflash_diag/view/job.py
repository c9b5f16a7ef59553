"""A job, one row per rank: the ``job`` section of ``doctor --json`` and ``top --batch --json`` (docs/jobs.md), and
the rows ``doctor``, ``top --batch`` and the live view print. Plain: no screen library."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dflash_diag.model import Finding
from dflash_diag.model.flightrec import GroupVerdict
from dflash_diag.model.job import JobAnalysis, JobTopology, RankSummary
from dflash_diag.model.mailbox import MailboxVerdict

JOB_SCHEMA = "dflash-diag.job/1"


@dataclass(frozen=True, slots=True)
class JobView:
    """What ``top`` shows of a job above the selected rank's threads: the title and one row per rank."""

    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    selected: int  # the row whose threads the frame holds


def _pct(share: float) -> float:
    return round(100.0 * share, 1)


def rank_json(s: RankSummary) -> dict[str, Any]:
    ident = s.identity
    probe = None
    if s.probe is not None:
        p = s.probe
        probe = {"entered": p.entered, "completed": p.completed, "current_op": p.current_op,
                 "current_seq": p.current_seq,
                 "current_for_s": None if p.current_for_s is None else round(p.current_for_s, 1),
                 "last_op": p.last_op, "entered_in_window": p.entered_in_window, "backend": p.backend,
                 "in_collectives_s": None if p.in_collectives_s is None else round(p.in_collectives_s, 3)}
    return {
        "rank": ident.rank, "local_rank": ident.local_rank, "pid": ident.pid, "alive": s.alive, "exited": s.exited,
        "samples": s.n_samples, "thread": s.thread,
        "collective_wait_pct": _pct(s.collective_share),
        "collective": None if s.collective is None else {"op": s.collective.op, "site": s.collective.site,
                                                         "pct": _pct(s.collective.share)},
        "in_collective_now": None if s.now is None else {"op": s.now.op, "site": s.now.site},
        "computing_pct": _pct(s.computing_share), "hot": s.hot, "where": s.where,
        "cpu_pct": None if s.cpu_pct is None else round(s.cpu_pct, 1),
        "step": s.step, "probe": probe, "workers": s.workers, "moving": s.progress,
        "headline": s.headline, "severity": s.severity.label if s.severity is not None else None,
    }


def finding_row(f: Finding) -> dict[str, Any]:
    """One finding as the job section lists it (the fields of doctor's ``findings`` entries)."""
    return {"rule_id": f.rule_id, "severity": f.severity.label, "kind": f.kind, "claim": f.claim,
            "evidence": [{"name": name, "value": value} for name, value in f.evidence], "remedy": f.remedy,
            "because": list(f.because), "explains": list(f.explains)}


def topology_json(topo: JobTopology) -> dict[str, Any]:
    return {"asked_pid": topo.asked_pid, "asked": topo.asked, "launcher_pid": topo.launcher_pid,
            "launcher_cmdline": list(topo.launcher_cmdline), "world_size": topo.world_size,
            "local_world_size": topo.local_world_size, "restart_count": topo.restart_count,
            "missing_local_ranks": list(topo.missing_local_ranks),
            "workers": {str(r.pid): list(r.workers) for r in topo.ranks if r.workers}, "notes": list(topo.notes)}


def job_json(analysis: JobAnalysis) -> dict[str, Any]:
    """The ``job`` section: the topology and one row per rank; ``nodes``: every rank on every node as the job's
    mailbox showed it (null: not read), with the Flight Recorders' matching."""
    job = analysis.observation
    nodes = mailbox_json(analysis.mailbox) if analysis.mailbox is not None else None
    if nodes is None and isinstance(job.mailbox, str):
        nodes = {"na": job.mailbox}
    return {"schema": JOB_SCHEMA, **topology_json(job.topology), "launcher_alive": job.launcher_alive,
            "window_s": round(job.window_s, 3), "ranks": [rank_json(s) for s in analysis.summaries], "nodes": nodes}


def _group_json(g: GroupVerdict) -> dict[str, Any]:
    pending = g.pending
    return {"group": g.pg_desc or g.pg_name, "ranks": list(g.ranks),
            "last_completed_by_all": None if g.last_completed_by_all is None else
            {"seq": g.last_completed_by_all.seq, "op": g.last_completed_by_all.op},
            "pending": None if pending is None else {
                "seq": pending.ref.seq, "op": pending.ref.op, "waiting": list(pending.waiting_ranks),
                "missing": list(pending.missing_ranks), "undumped": list(pending.undumped_ranks),
                "waiting_since_s": pending.waiting_since_s, "all_entered": pending.all_entered},
            "mismatches": [{"seq": m.seq, "kind": m.kind} for m in g.mismatches]}


def mailbox_json(v: MailboxVerdict) -> dict[str, Any]:
    """Every rank on every node over the window (the job's mailbox) and the Flight Recorders matched."""
    fr = v.flight_recorder
    return {"na": None, "store": v.address, "world_size": v.world_size, "job_moved": v.job_moved,
            "ranks": [{"rank": r.rank, "node": r.node_rank, "host": r.host, "pid": r.pid,
                       "wait_pct": None if r.wait_share is None else _pct(r.wait_share),
                       "collectives_done": r.collectives_done, "steps_done": r.steps_done,
                       "silent_s": None if r.silent_s is None else round(r.silent_s, 1), "final": r.final,
                       "answered": r.answered, "where": r.where} for r in v.ranks],
            "flight_recorder": None if fr is None else {
                "dumped": list(fr.dumped_ranks), "undumped": list(fr.undumped_ranks),
                "groups": [_group_json(g) for g in fr.groups], "notes": list(fr.notes)},
            "notes": list(v.notes)}


def node_lines_of(job: Mapping[str, Any]) -> list[str]:
    """The ``nodes`` section as text: one line per rank, then each group's Flight Recorder verdict."""
    nodes = job.get("nodes")
    if not nodes:
        return []
    if nodes.get("na"):
        return [f"every node: N/A: {nodes['na']}"]
    out = [f"every node (the job's store at {nodes['store']}): rank, node, in coll., collectives done, last post"]
    for r in nodes["ranks"]:
        wait = "-" if r["wait_pct"] is None else f"{r['wait_pct']:.0f}%"
        done = "-" if r["collectives_done"] is None else str(r["collectives_done"])
        post = "never" if r["silent_s"] is None else f"{r['silent_s']:.0f} s ago" + (" (final)" if r["final"] else "")
        node = "?" if r["node"] is None else str(r["node"])
        out.append(f"  {r['rank']:>4}  node {node:<3} {wait:>5}  {done:>6}  {post}  {_short(r['where'], 90)}")
    fr = nodes["flight_recorder"]
    for g in (fr or {}).get("groups", []):
        last = g["last_completed_by_all"]
        text = f"Flight Recorder, group {g['group']}: all completed #{last['seq']} {last['op']}" if last else \
            f"Flight Recorder, group {g['group']}: no collective completed by all"
        p = g["pending"]
        if p is not None and p["waiting_since_s"] is not None:
            text += (f"; #{p['seq']} {p['op']} pending: ranks {p['waiting']} waiting {p['waiting_since_s']:.0f} s, "
                     f"never entered {p['missing'] or '-'}, no dump {p['undumped'] or '-'}")
        out.append(text)
    return out


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def rank_rows(analysis: JobAnalysis) -> list[tuple[str, ...]]:
    """One row per rank (:func:`rank_rows_of` of each rank's JSON row)."""
    return rank_rows_of(job_json(analysis))


def rank_rows_of(job: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """The ``job`` section's rows as text: rank, PID, state, share in collectives, workers, step, the collective it
    waits in (where), where its time goes."""
    rows: list[tuple[str, ...]] = []
    for r in job["ranks"]:
        state = "exited" if r["exited"] else ("gone" if not r["alive"] else ("moving" if r["moving"] else "stuck"))
        coll = ""
        if r["collective"] is not None:
            coll = r["collective"]["op"] + (f" at {r['collective']['site']}" if r["collective"]["site"] else "")
        probe = r["probe"]
        if probe is not None and probe["current_seq"] is not None and probe["current_op"]:
            coll += f" [#{probe['current_seq']} {probe['current_op']}]"
        rows.append((str(r["rank"]) if r["rank"] is not None else "-", str(r["pid"]), state,
                     f"{r['collective_wait_pct']:.0f}%", str(r["workers"]), "" if r["step"] is None else str(r["step"]),
                     coll or "-", r["hot"] or "-"))
    return rows


RANK_HEADER = ("rank", "PID", "state", "in coll.", "workers", "step", "waits in (where)", "computes in")


def rank_lines(analysis: JobAnalysis, width: int = 160) -> list[str]:
    """The rows as fixed-width text (``top --batch``): the last column is not cut."""
    return rank_lines_of(job_json(analysis), width)


def rank_lines_of(job: Mapping[str, Any], width: int = 160) -> list[str]:
    """The ``job`` section's rows as fixed-width text (``doctor``, ``top --batch``): the last column is not cut."""
    rows = [RANK_HEADER, *rank_rows_of(job)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(RANK_HEADER))]
    widths[6] = min(widths[6], 48)
    out = []
    for row in rows:
        cells = [_short(c, widths[i]).ljust(widths[i]) if i < len(row) - 1 else c for i, c in enumerate(row)]
        out.append("  ".join(cells).rstrip())
    return out


def job_title(analysis: JobAnalysis) -> str:
    """``torchrun PID 100 (launcher): 4 ranks, WORLD_SIZE 4, 5.0 s sampled``."""
    job = analysis.observation
    topo = job.topology
    who = (f"launcher PID {topo.launcher_pid}" + (" (exited)" if job.launcher_alive is False else "")
           if topo.launcher_pid is not None else f"rank PID {topo.asked_pid} (no launcher)")
    world = f", WORLD_SIZE {topo.world_size}" if topo.world_size is not None else ""
    restarts = f", restarted {topo.restart_count} time(s)" if topo.restart_count else ""
    return f"job of {who}: {len(topo.ranks)} rank(s){world}{restarts}, {job.window_s:.1f} s sampled"


__all__ = ["JOB_SCHEMA", "RANK_HEADER", "JobView", "finding_row", "job_json", "job_title", "rank_json", "rank_lines",
           "rank_lines_of", "rank_rows", "rank_rows_of"]
