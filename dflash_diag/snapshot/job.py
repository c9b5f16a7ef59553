"""A bug-report bundle of a whole job (docs/jobs.md): every rank gathered at once, the job analysed across them.

The bundle is the lowest rank's bundle (so ``diff`` compares it as any other) plus, at the top, what the job adds:
``snapshot.json`` gains a ``job`` section (the topology, one row per rank, the job's findings and headline),
``report.md`` opens with the job (its headline, rows and findings) before the rank's own report, and every other
rank brings its own ``rank<N>-report.md``, ``rank<N>-snapshot.json`` and ``rank<N>-stacks.txt`` (up to
``MAX_RANK_FILES`` ranks: a bundle holds at most 64 files).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from dflash_diag.model import Analysis
from dflash_diag.model.job import JobAnalysis, JobObservation, JobTopology
from dflash_diag.snapshot import SnapshotResult, _top_name, output_path
from dflash_diag.snapshot.build import analyse_gathered, build_files
from dflash_diag.snapshot.bundle import prepare_output
from dflash_diag.snapshot.gather import DEFAULT_DEADLINE_S, DEFAULT_DURATION_S, Gathered, gather

MAX_RANK_FILES = 16
RANK_FILES = ("report.md", "snapshot.json", "stacks.txt")


def take_job_snapshot(
    topology: JobTopology,
    *,
    output: Path | None = None,
    as_dir: bool = False,
    force: bool = False,
    duration_s: float = DEFAULT_DURATION_S,
    deadline_s: float = DEFAULT_DEADLINE_S,
    board_dir: str | None = None,
    wall_clock: Callable[[], float] = time.time,
) -> SnapshotResult:
    from dflash_diag.analysis.job import analyse_job
    from dflash_diag.sources.pyspy_find import find_pyspy

    t0 = time.monotonic()
    name_pid = topology.launcher_pid or topology.asked_pid
    path = output_path(name_pid, output, as_dir, wall_clock())
    prepared = prepare_output(path, as_dir=as_dir, force=force)
    try:
        find_pyspy()  # before the threads: sysconfig's first use is not thread-safe
        with ThreadPoolExecutor(max_workers=max(1, len(topology.ranks)), thread_name_prefix="dflash-diag-rank") as pool:
            gathered = list(pool.map(lambda r: gather(r.pid, duration_s=duration_s, deadline_s=deadline_s,
                                                      board_dir=board_dir, wall_clock=wall_clock), topology.ranks))
        end_wall_s = wall_clock()
        analyses = [analyse_gathered(g, end_wall_s) for g in gathered]
        job = JobObservation(topology=topology, ranks=tuple(a.observation for a in analyses),
                             started_wall_s=min(g.started_wall_s for g in gathered) if gathered else end_wall_s,
                             window_s=max((a.observation.window_s for a in analyses), default=0.0),
                             launcher_alive=None, warnings=topology.notes)
        analysis = analyse_job(job, now_wall_s=end_wall_s)
        files = job_files(analysis, gathered, analyses, end_wall_s)
    except BaseException:
        prepared.abandon()
        raise
    prepared.commit(files, top=_top_name(path), mtime_s=end_wall_s)
    missing = tuple((f"{r.label}: {what}", why) for r, g in zip(topology.ranks, gathered, strict=True)
                    for what, why in g.missing)
    return SnapshotResult(path=path, findings=analysis.findings, missing=missing, elapsed_s=time.monotonic() - t0,
                          alive_at_end=any(g.alive_at_end for g in gathered))


def job_files(analysis: JobAnalysis, gathered: list[Gathered], analyses: list[Analysis],
              end_wall_s: float) -> dict[str, bytes]:
    """The lowest rank's bundle, the job's section and report on top, the other ranks' own files beside."""
    from dflash_contract.redact import redact_tree, scrub_tree
    from dflash_diag.snapshot.build import known_secrets
    from dflash_diag.view.job import finding_row, job_json, job_title, rank_lines

    ranks = analysis.observation.topology.ranks
    per_rank = [build_files(g, a, end_wall_s) for g, a in zip(gathered, analyses, strict=True)]
    files = dict(per_rank[0]) if per_rank else {}
    doc = json.loads(files["snapshot.json"]) if "snapshot.json" in files else {}
    headline = analysis.headline
    secrets = frozenset().union(*(known_secrets(g) for g in gathered))
    job_doc = {**job_json(analysis), "phase": analysis.phase,
               "headline": None if headline is None else {"rule_id": headline.rule_id, "text": headline.text,
                                                          "severity": headline.severity.label},
               "findings": [finding_row(f) for f in analysis.findings]}
    # The rows and claims come from redacted stacks; the whole section passes the bundle's redactor once more.
    doc["job"] = {**scrub_tree(redact_tree(job_doc), secrets),
                  "files": {str(r.rank if r.rank is not None else r.pid): [f"rank{r.rank}-{n}" for n in RANK_FILES]
                            for r in ranks[1:MAX_RANK_FILES]}}
    files["snapshot.json"] = (json.dumps(doc, indent=1, allow_nan=False) + "\n").encode()
    lines = [f"# {job_title(analysis)}", ""]
    if headline is not None:
        lines += [f"**{headline.severity.label.upper()}** {headline.text}", "", f"fix: {headline.remedy}", ""]
    lines += ["```", *rank_lines(analysis), "```", "", "## The job's findings", ""]
    lines += [f"- [{f.severity.label}] `{f.rule_id}`: {f.claim}" for f in analysis.findings] or ["- none"]
    first = ranks[0].label if ranks else "the first rank"
    lines += ["", f"The rest of this report is {first}'s; the other ranks' are rank<N>-report.md.", "", "---", ""]
    files["report.md"] = ("\n".join(lines) + "\n").encode() + files.get("report.md", b"")
    for rank, rank_files in list(zip(ranks, per_rank, strict=True))[1:MAX_RANK_FILES]:
        for name in RANK_FILES:
            files[f"rank{rank.rank}-{name}"] = rank_files[name]
    return files


__all__ = ["take_job_snapshot"]
