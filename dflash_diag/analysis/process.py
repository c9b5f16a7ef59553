"""One process's analysis: thread states and stages, the pipeline view, the wait-for graph, every rule, the causal
links between causes and symptoms, and the headline. Pure; never raises (a part that fails becomes an ``NA``
pane or a note in ``Analysis.errors``)."""

from __future__ import annotations

from dataclasses import replace

from dflash_diag.analysis.causal import link
from dflash_diag.analysis.findings import FAMILIES, run_families
from dflash_diag.analysis.findings._context import Context
from dflash_diag.analysis.kernels import summarise
from dflash_diag.analysis.pipeline import DEFAULT_QUEUE, pipeline_view
from dflash_diag.analysis.sampled import Sampled
from dflash_diag.analysis.stages import StageAssignment
from dflash_diag.analysis.threads import aggregate
from dflash_diag.analysis.waits import graph_of
from dflash_diag.model import NA, Analysis, Finding, Maybe, Observation, PipelineView, Severity, ThreadStats
from dflash_diag.model.analysis import PHASE_HUNG
from dflash_diag.model.findings import NOTE
from dflash_diag.model.kernels import KernelSummary


def analyse_process(obs: Observation, *, previous_bottleneck: str = "") -> Analysis:
    """Everything the tool can say about ``obs``: a pure function of it. The observation holds what it is judged
    with: its stage patterns (default ``target-*`` / ``drafter-*``; stages are inferred from queue use when no
    thread matches) and the wall-clock time taken as "now" (board staleness; default: the window's end).
    ``previous_bottleneck``: the stage a live screen named last (the verdict's hysteresis; none for one window)."""
    now = obs.judged_at_wall_s
    errors: list[str] = []
    kernels: KernelSummary | None = None
    if obs.kernels is not None:
        try:
            kernels = summarise(obs.kernels)
        except Exception as exc:
            errors.append(f"kernel trace summary failed: {type(exc).__name__}: {exc}")
    threads: tuple[ThreadStats, ...] = ()
    assignment = StageAssignment(stages={}, how="")
    try:
        threads, assignment = aggregate(obs, obs.patterns)
    except Exception as exc:  # an analysis bug is shown, never raised into a UI or a report
        errors.append(f"thread analysis failed: {type(exc).__name__}: {exc}")
    pipeline: Maybe[PipelineView]
    try:
        queue = assignment.queue if assignment.how == "queues" and assignment.queue else DEFAULT_QUEUE
        pipeline = pipeline_view(obs, threads, queue_name=queue, now_wall_s=now, stages_from=assignment.how,
                                 previous=previous_bottleneck)
    except Exception as exc:
        pipeline = NA(f"pipeline analysis failed: {type(exc).__name__}: {exc}")
        errors.append(pipeline.reason)
    if isinstance(pipeline, NA):
        return Analysis(observation=obs, threads=threads, pipeline=pipeline, findings=(), headline=None,
                        errors=tuple(errors), kernels=kernels)
    waits = graph_of(Sampled(obs=obs, threads=threads))
    if isinstance(waits, NA):
        errors.append(waits.reason)
    ctx = Context(obs=obs, threads=threads, pipeline=pipeline, now_wall_s=now, assignment=assignment, kernels=kernels,
                  wait_graph=waits)
    try:
        findings = run_families(ctx, FAMILIES)
        linked, headline, phase = link(findings)
    except Exception as exc:
        errors.append(f"findings failed: {type(exc).__name__}: {exc}")
        failed = Finding(rule_id="rule-error", severity=Severity.INFO, claim="the findings could not be computed",
                         evidence=(("error", f"{type(exc).__name__}: {exc}"[:200]),),
                         remedy="Please report this with `dflash-diag snapshot PID` attached.", kind=NOTE)
        return Analysis(observation=obs, threads=threads, pipeline=pipeline, findings=(failed,), headline=None,
                        errors=tuple(errors), kernels=kernels)
    if phase == PHASE_HUNG:
        # One report never contradicts itself: a pipeline that does not move has no bottleneck stage.
        pipeline = replace(pipeline, bottleneck="hung",
                           verdict="hung: nothing moves, so no stage limits throughput (the headline says why)")
    return Analysis(observation=obs, threads=threads, pipeline=pipeline, findings=linked, headline=headline,
                    phase=phase, errors=tuple(errors), waits=waits, kernels=kernels)


__all__ = ["analyse_process"]
