"""``doctor``'s report as one document and as one list of lines, for a process and a job alike.

- :func:`doctor_doc` writes the one report document (schema ``dflash-diag.doctor/1``, docs/findings.md): what
  ``doctor --json`` prints, live or replayed from a saved observation. A job's report has the same keys, summed
  over its ranks, and its ``job`` section (``view.job``: the topology and one row per rank); a process's ``job``
  is null.
- :func:`doctor_lines` turns the document into tagged lines (``view.findings``' :class:`Line`): the title, a job's
  rows, the headline, the pipeline and the wait-for path, every finding, the summary and the notes. A thin
  adapter draws them: rich for ``doctor`` (``cli/_output.print_lines``), plain text for anything else
  (``view.findings.plain_lines``).

The lines are built from the document alone, so the text and the JSON never say different things.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

from dflash_diag.model import NA, Analysis, NativeProfile, Severity
from dflash_diag.model.analysis import Diagnosis
from dflash_diag.model.job import JobAnalysis
from dflash_diag.model.kernels import KernelWindow
from dflash_diag.view.findings import (
    ALERT,
    CLEAR,
    NOTE,
    SUMMARY,
    TITLE,
    FindingDoc,
    HeadlineDoc,
    Line,
    Span,
    finding_json,
    finding_lines,
    headline_json,
    headline_lines,
)
from dflash_diag.view.job import job_json, job_title, node_lines_of, rank_lines_of
from dflash_diag.view.kernels import summary_json
from dflash_diag.view.report import stage_names_json
from dflash_diag.view.waits import waits_json

DOCTOR_SCHEMA = "dflash-diag.doctor/1"


class PipelineDoc(TypedDict):
    bottleneck: str  # the limiting stage; "hung" when nothing moves; "unknown" when not judged (a job, an N/A)
    verdict: str
    stages_from: str  # names | board | queues | ""
    stage_names: NotRequired[dict[str, str]]  # view.report.stage_names_json: the words a person reads per stage


class SummaryDoc(TypedDict):
    critical: int
    warning: int
    info: int


class DoctorDoc(TypedDict):
    """``doctor --json`` (docs/findings.md): of one process, or of a job summed over its ranks."""

    schema: str
    pid: int  # the PID the report is of: the process, or the one named for the job
    title: str  # the report's first line: "PID 12345, 5.0 s sampled, ..." or "job of launcher PID ..."
    window_s: float
    stack_samples: int
    threads: int
    process_alive: bool
    phase: str
    headline: HeadlineDoc | None
    summary: SummaryDoc
    healthy: bool
    pipeline: PipelineDoc
    findings: list[FindingDoc]
    waits: dict[str, Any]  # view.waits: the wait-for graph (a job: N/A, each rank has its own)
    kernels: dict[str, object] | None  # view.kernels.summary_json of a --kernels-trace; null without one
    warnings: list[str]
    job: dict[str, Any] | None  # view.job.job_json: the topology and one row per rank; null for one process
    kernel_window: NotRequired[dict[str, Any]]  # doctor --kernel-window: what the recording was and cost
    native_stacks: NotRequired[dict[str, Any]]  # the native look after a window with no cause: what it took


def _summary(analysis: Diagnosis) -> SummaryDoc:
    counts = {s.label: sum(1 for f in analysis.findings if f.severity == s) for s in Severity}
    return {"critical": counts["critical"], "warning": counts["warning"], "info": counts["info"]}


def _pipeline(analysis: Analysis) -> PipelineDoc:
    pipeline = analysis.pipeline
    if isinstance(pipeline, NA):
        return {"bottleneck": "unknown", "verdict": str(pipeline), "stages_from": ""}
    return {"bottleneck": pipeline.bottleneck, "verdict": pipeline.verdict, "stages_from": pipeline.stages_from,
            "stage_names": stage_names_json(pipeline.names)}


def _title(pid: int, window_s: float, samples: int, threads: int, native: NativeProfile | None = None) -> str:
    title = f"PID {pid}, {window_s:.1f} s sampled, {samples} stack samples of {threads} threads"
    if native is None:
        return title
    if native.error or not native.samples:
        return title + f"; no native stacks ({native.error or 'none taken'})"
    return title + f"; then {native.samples} native stack samples in {native.duration_s:.1f} s (the process paused)"


def doctor_doc(analysis: Analysis | JobAnalysis) -> DoctorDoc:
    """The one report document of a process's analysis or of a job's."""
    common = {"schema": DOCTOR_SCHEMA, "phase": analysis.phase, "headline": headline_json(analysis.headline),
              "summary": _summary(analysis), "healthy": analysis.healthy,
              "findings": [finding_json(f) for f in analysis.findings]}
    if isinstance(analysis, JobAnalysis):
        job = analysis.observation
        samples = sum(len(o.stacks) for o in job.ranks)
        threads = sum(len(a.threads) for a in analysis.ranks)
        return {**common,  # type: ignore[typeddict-item]
                "pid": job.topology.asked_pid, "title": job_title(analysis), "window_s": round(job.window_s, 3),
                "stack_samples": samples, "threads": threads,
                "process_alive": any(o.process_alive for o in job.ranks),
                "pipeline": {"bottleneck": "hung" if analysis.phase == "hung" else "unknown", "verdict": "",
                             "stages_from": ""},
                "waits": waits_json(NA("a job: each rank has its own wait-for graph (the job section's rows)")),
                "kernels": None,
                "warnings": [*job.warnings, *(w for o in job.ranks for w in o.warnings), *analysis.errors],
                "job": job_json(analysis)}
    obs = analysis.observation
    doc: DoctorDoc = {**common,  # type: ignore[typeddict-item]
                      "pid": obs.pid,
                      "title": _title(obs.pid, obs.window_s, len(obs.stacks), len(analysis.threads), obs.native),
                      "window_s": round(obs.window_s, 3), "stack_samples": len(obs.stacks),
                      "threads": len(analysis.threads), "process_alive": obs.process_alive,
                      "pipeline": _pipeline(analysis), "waits": waits_json(analysis.waits),
                      "kernels": None if analysis.kernels is None else summary_json(analysis.kernels),
                      "warnings": [*obs.warnings, *analysis.errors], "job": None}
    if obs.kernel_window is not None:
        doc["kernel_window"] = kernel_window_json(obs.kernel_window)
    if obs.native is not None:
        doc["native_stacks"] = {"samples": obs.native.samples, "seconds": round(obs.native.duration_s, 3),
                                "rate_hz": obs.native.rate_hz, "error": obs.native.error}
    return doc


def kernel_window_json(window: KernelWindow) -> dict[str, Any]:
    """``doctor --kernel-window``'s recording: what it was and what its stop and export cost the process."""
    return {"cuda": window.cuda, "torch": window.torch, "steps": window.steps, "stop_ms": window.stop_ms,
            "export_ms": window.export_ms, "torch_trace_bytes": window.torch_trace_bytes, "method": window.method}


def doctor_lines(doc: DoctorDoc) -> list[Line]:
    """The report as lines: title, a job's rows, headline, pipeline and waits, findings, summary, notes."""
    lines = [Line("note", (Span("dflash-diag doctor", TITLE), Span(f": {doc['title']}"),
                           *((Span(" (the process exited)", ALERT),) if not doc["process_alive"] else ())))]
    if doc["job"] is not None:
        lines += [Line("note", (Span(row),), depth=1) for row in rank_lines_of(doc["job"])]
        lines += [Line("note", (Span(row),), depth=1) for row in node_lines_of(doc["job"])]
    if doc["headline"] is not None:
        lines += [Line("note", ()), *headline_lines(doc["headline"])]
    if doc["pipeline"]["verdict"] and doc["phase"] == "steady":
        lines.append(Line("note", (Span(f"pipeline: {doc['pipeline']['verdict']}"),)))
    path = doc["waits"].get("path")
    if path:
        lines.append(Line("note", (Span(f"waits (root last): {path}"),)))
    for finding in doc["findings"]:
        lines += finding_lines(finding)
    lines.append(Line("note", ()))
    summary = doc["summary"]
    if doc["healthy"]:
        extra = f" ({summary['info']} informational)" if summary["info"] else ""
        lines.append(Line("note", (Span("no findings", CLEAR), Span(f": nothing at warning level or above{extra}."))))
    else:
        lines.append(Line("note", (Span(f"{summary['critical']} critical, {summary['warning']} warning, "
                                        f"{summary['info']} info", SUMMARY),
                                   Span(" -- rules explained in docs/findings.md"))))
    lines += [Line("note", (Span(f"note: {warning}", NOTE),)) for warning in doc["warnings"]]
    return lines


__all__ = ["DOCTOR_SCHEMA", "DoctorDoc", "PipelineDoc", "SummaryDoc", "doctor_doc", "doctor_lines"]
