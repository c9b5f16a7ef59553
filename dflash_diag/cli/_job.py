"""A job's report, for ``doctor`` (docs/jobs.md): its JSON (the keys of one process's report, summed over the
ranks, plus the ``job`` section) and its text."""

from __future__ import annotations

from typing import Any

from dflash_diag.model import Severity
from dflash_diag.model.job import JobAnalysis


def job_report_json(pid: int, analysis: JobAnalysis, schema: str) -> dict[str, Any]:
    """``doctor --json`` of a job: the keys of one process's report (summed over the ranks), plus ``job``."""
    from dflash_diag.model import NA
    from dflash_diag.view.findings import finding_json, headline_json
    from dflash_diag.view.job import job_json
    from dflash_diag.view.waits import waits_json

    job, findings, headline = analysis.observation, analysis.findings, analysis.headline
    return {
        "schema": schema,
        "pid": pid,
        "window_s": round(job.window_s, 3),
        "stack_samples": sum(len(o.stacks) for o in job.ranks),
        "threads": sum(len(a.threads) for a in analysis.ranks),
        "process_alive": any(o.process_alive for o in job.ranks),
        "phase": analysis.phase,
        "headline": headline_json(headline),
        "summary": {s.label: sum(1 for f in findings if f.severity == s) for s in reversed(Severity)},
        "healthy": analysis.healthy,
        "pipeline": {"bottleneck": "hung" if analysis.phase == "hung" else "unknown",
                     "verdict": "", "stages_from": ""},
        "findings": [finding_json(f) for f in findings],
        "waits": waits_json(NA("a job: each rank has its own wait-for graph (the job section's rows)")),
        "warnings": list(job.warnings) + [w for o in job.ranks for w in o.warnings] + list(analysis.errors),
        "job": job_json(analysis),
    }


def print_job_report(analysis: JobAnalysis, report: dict[str, Any]) -> None:
    from rich.markup import escape

    from dflash_diag.cli._output import console
    from dflash_diag.cli.doctor import print_findings
    from dflash_diag.view.job import job_title, rank_lines

    out = console()
    out.print(f"[bold]dflash-diag doctor[/]: {escape(job_title(analysis))}")
    for line in rank_lines(analysis, width=out.width or 160):
        out.print("    " + escape(line), soft_wrap=True)
    print_findings(report)


__all__ = ["job_report_json", "print_job_report"]
