"""The files of a job's bug-report bundle (docs/jobs.md): every rank gathered in one window (``snapshot.gather``),
the job analysed across them (``snapshot.build.analyse_target``).

The bundle is the lowest rank's bundle (so ``diff`` compares it as any other) plus, at the top, what the job adds:
``snapshot.json`` gains a ``job`` section (the topology, one row per rank, the job's findings and headline),
``report.md`` opens with the job (its headline, rows and findings) before the rank's own report, and every other
rank brings its own ``rank<N>-report.md``, ``rank<N>-snapshot.json`` and ``rank<N>-stacks.txt`` (up to
``MAX_RANK_FILES`` ranks: a bundle holds at most 64 files).
"""

from __future__ import annotations

import json

from dflash_contract.redact import redact_tree, scrub_tree
from dflash_diag.model.job import JobAnalysis
from dflash_diag.snapshot.build import build_files, known_secrets
from dflash_diag.snapshot.gather import Gathered
from dflash_diag.view.job import finding_row, job_json, job_title, rank_lines

MAX_RANK_FILES = 16
RANK_FILES = ("report.md", "snapshot.json", "stacks.txt")


def job_files(analysis: JobAnalysis, gathered: list[Gathered], end_wall_s: float) -> dict[str, bytes]:
    """The lowest rank's bundle, the job's section and report on top, the other ranks' own files beside."""
    ranks = analysis.observation.topology.ranks
    per_rank = [build_files(g, a, end_wall_s) for g, a in zip(gathered, analysis.ranks, strict=True)]
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


__all__ = ["MAX_RANK_FILES", "job_files"]
