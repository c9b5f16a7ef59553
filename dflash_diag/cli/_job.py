"""A job of several ranks, for the commands that take a PID: find it (``--job``, or from the process tree), sample
every rank in one window, analyse it, report it (docs/jobs.md).

A PID is taken as a job when it is a launcher with rank children (torchrun's own PID, or ``dflash-diag run``'s
in front of it) or a rank with peers under one launcher; ``--job`` insists (a PID that is neither is a usage
error), ``--no-job`` looks at the one process only.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dflash_diag.errors import AttachError, CommandError, ExitCode
from dflash_diag.model import Severity
from dflash_diag.model.job import ASKED_PROCESS, JobAnalysis, JobObservation, JobTopology
from dflash_diag.sources.config import SamplerConfig

if TYPE_CHECKING:
    from dflash_diag.analysis.threads import StagePatterns


def add_job_flag(parser: argparse.ArgumentParser) -> None:
    # Two flags of one group, not one BooleanOptionalAction: `--job --no-job` is a usage error, not the last one winning.
    either = parser.add_mutually_exclusive_group()
    either.add_argument("--job", action="store_const", const=True, default=None,
                        help="look at the whole job the PID launches or belongs to (torchrun's PID, or any rank's): "
                             "every rank and its worker processes in one window (default: when the PID is a launcher "
                             "of ranks or a rank with peers)")
    either.add_argument("--no-job", dest="job", action="store_const", const=False,
                        help="this one process only (docs/jobs.md)")


def job_topology(pid: int, wanted: bool | None) -> JobTopology | None:
    """The job to look at, or None for one process. ``wanted``: the ``--job`` flag (None: decide from the tree)."""
    if wanted is False:
        return None
    from dflash_diag.sources.job import find_job

    topology = find_job(pid)
    if topology is None or not topology.ranks:
        if wanted:
            raise CommandError(f"PID {pid} is neither a rank (no RANK or LOCAL_RANK in its environment) nor the "
                               "launcher of ranks (none among its children): leave out --job to look at it alone",
                               ExitCode.USAGE)
        return None
    if not wanted and topology.asked == ASKED_PROCESS and len(topology.ranks) == 1:
        return None  # a process that merely has RANK set: one process, as it always was
    return topology


@dataclass(frozen=True)
class JobObserved:
    observation: JobObservation
    analysis: JobAnalysis
    rank_rate_hz: float | None  # the stack rate each rank was sampled at


def observe_job(topology: JobTopology, duration_s: float, config: SamplerConfig, *, progress: bool = False,
                patterns: StagePatterns | None = None) -> JobObserved:
    """Sample every rank for one window (a progress bar on a terminal), add each one's outside evidence, analyse.
    AttachError(NO_PROCESS) when not one stack sample of any rank could be taken."""
    from dflash_diag.analysis.job import analyse_job
    from dflash_diag.sources.jobcollect import JobCollector
    from dflash_diag.sources.outside import OutsideReader

    collector = JobCollector(topology, config, enrich=lambda pid, obs: OutsideReader(pid).enrich(obs))
    job = _collect(collector, duration_s, progress, len(topology.ranks))
    if not any(o.stacks for o in job.ranks):
        reasons = "; ".join(w for o in job.ranks for w in o.warnings)[:400]
        raise AttachError(f"no stack sample of any of the {len(topology.ranks)} rank(s) could be taken in "
                          f"{duration_s:g} s ({reasons or 'they exited'})", ExitCode.NO_PROCESS)
    analysis = analyse_job(job, patterns, now_wall_s=time.time())
    return JobObserved(job, analysis, collector.rank_rate_hz)


def _collect(collector: Any, duration_s: float, progress: bool, n_ranks: int) -> JobObservation:
    if not progress or not sys.stderr.isatty():
        return collector.collect(duration_s)  # type: ignore[no-any-return]
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    from dflash_diag.cli._output import console

    with Progress(TextColumn(f"sampling {n_ranks} ranks"), BarColumn(),
                  TextColumn("{task.completed:.1f}/{task.total:g} s"), TimeRemainingColumn(), transient=True,
                  console=console(stderr=True)) as bar:
        task = bar.add_task("sampling", total=duration_s)
        return collector.collect(duration_s,  # type: ignore[no-any-return]
                                 progress=lambda done, total: bar.update(task, completed=done))


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


def check_job_args(args: argparse.Namespace) -> None:
    if getattr(args, "attach", False):
        raise CommandError("--attach looks at one process: for probes in every rank start the job under them "
                           "(dflash-diag run -- torchrun ...), or pass --no-job", ExitCode.USAGE)


__all__ = ["JobObserved", "add_job_flag", "check_job_args", "job_report_json", "job_topology", "observe_job",
           "print_job_report"]
