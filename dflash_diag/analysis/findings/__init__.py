"""Findings: named symptoms and root causes with the numbers behind them and the fix (docs/findings.md lists
every rule).

Each module is one rule family with a ``check(ctx) -> Iterator[Finding]``. :func:`evaluate` runs them all,
isolates failures (a rule that trips over an odd payload is reported, never hides the others) and sorts
the result most severe first, then by estimated impact. Linking causes to symptoms and the headline are
``analysis.causal``'s job; :func:`dflash_diag.analysis.analyse` does both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import ModuleType

from dflash_diag.analysis.findings import (
    allocator,
    changed_value,
    checkpoint,
    collectives_rate,
    compile,
    connect,
    cudagraphs,
    diagnostics,
    fastpath,
    gil,
    gpu,
    gpu_memory,
    hang,
    health,
    hostsync,
    interposition,
    job,
    kernels,
    library_argument,
    liveness,
    native_threads,
    pipeline,
    precision,
    process,
    resources,
    scheduler,
    setting_code,
    settings,
    stale,
    transfers,
    unused_output,
    waits,
    wasted,
)
from dflash_diag.analysis.findings._context import Context, JobContext
from dflash_diag.analysis.findings._registry import RuleSpec
from dflash_diag.analysis.kernels import summarise
from dflash_diag.analysis.sampled import Sampled
from dflash_diag.analysis.stages import StageAssignment
from dflash_diag.analysis.waits import graph_of
from dflash_diag.model import Finding, Observation, PipelineView, Severity, ThreadStats
from dflash_diag.model.findings import NOTE

Rule = Callable[[Context], Iterator[Finding]]

# The rule families, in the order they run: each module has ``check(ctx)`` and ``RULES`` (what it may find).
FAMILIES: tuple[tuple[str, ModuleType], ...] = (
    ("process", process),
    ("liveness", liveness),
    ("hang", hang),
    ("waits", waits),
    ("pipeline", pipeline),
    ("resources", resources),
    ("scheduler", scheduler),
    ("connect", connect),
    ("native_threads", native_threads),
    ("settings", settings),
    ("setting_code", setting_code),
    ("changed_value", changed_value),
    ("library_argument", library_argument),
    ("diagnostics", diagnostics),
    ("interposition", interposition),
    ("fastpath", fastpath),
    ("stale", stale),
    ("health", health),
    ("checkpoint", checkpoint),
    ("compile", compile),
    ("cudagraphs", cudagraphs),
    ("allocator", allocator),
    ("gil", gil),
    ("hostsync", hostsync),
    ("gpu", gpu),
    ("precision", precision),
    ("gpu_memory", gpu_memory),
    ("transfers", transfers),
    ("kernels", kernels),
    ("wasted", wasted),
    ("collectives_rate", collectives_rate),
    ("unused_output", unused_output),
)
RULE_FAMILIES: tuple[tuple[str, Rule], ...] = tuple((name, module.check) for name, module in FAMILIES)
# The rules of a job of several ranks (``analysis.job``): their ``check`` reads a ``findings.job.JobContext``.
JOB_FAMILIES: tuple[tuple[str, ModuleType], ...] = (("job", job),)
# The diagnosis' own note: a rule that failed, or found something it did not declare.
RULE_ERROR = RuleSpec("rule-error", kind=NOTE, slows=False)
REGISTRY: dict[str, RuleSpec] = {spec.id: spec for _, module in FAMILIES + JOB_FAMILIES for spec in module.RULES}
REGISTRY[RULE_ERROR.id] = RULE_ERROR
# Every rule id a finding may carry (docs/findings.md documents each; a test keeps the two in sync).
RULE_IDS: tuple[str, ...] = tuple(REGISTRY)


def sort_findings(findings: list[Finding] | tuple[Finding, ...]) -> tuple[Finding, ...]:
    """Most severe first, then the largest estimated impact, then by rule id (stable output)."""
    return tuple(sorted(findings, key=lambda f: (-int(f.severity), -f.impact, f.rule_id, f.claim)))


def evaluate(
    obs: Observation,
    threads: tuple[ThreadStats, ...],
    pipeline: PipelineView,
    *,
    now_wall_s: float,
    assignment: StageAssignment | None = None,
) -> tuple[Finding, ...]:
    """All findings for one observation window, most severe first (not yet linked: see ``analysis.analyse``)."""
    ctx = Context(obs=obs, threads=threads, pipeline=pipeline, now_wall_s=now_wall_s,
                  assignment=assignment or StageAssignment(stages={}, how=""),
                  kernels=summarise(obs.kernels) if obs.kernels is not None else None,
                  wait_graph=graph_of(Sampled(obs=obs, threads=threads)))
    return run_families(ctx, FAMILIES)


def run_families(ctx: Context | JobContext, families: tuple[tuple[str, ModuleType], ...]) -> tuple[Finding, ...]:
    """Every family's findings; a family that raises, or finds what it did not declare, becomes a rule-error."""
    found: list[Finding] = []
    for family, module in families:
        declared = {spec.id: spec for spec in module.RULES}
        try:
            for finding in module.check(ctx):
                spec = declared.get(finding.rule_id)
                if spec is None or spec.kind != finding.kind:
                    found.append(_rule_error(family, f"undeclared finding {finding.rule_id!r} ({finding.kind}): "
                                                     "declare it in the family's RULES"))
                    continue
                found.append(finding)
        except Exception as exc:  # a rule bug must not hide the other findings
            found.append(_rule_error(family, f"{type(exc).__name__}: {exc}"))
    return sort_findings(found)


def _rule_error(family: str, error: str) -> Finding:
    return Finding(rule_id=RULE_ERROR.id, severity=Severity.INFO,
                   claim=f"the {family} rules could not read this observation",
                   evidence=(("error", error[:200]),),
                   remedy="Please report this with `dflash-diag snapshot PID` attached.", kind=NOTE)


__all__ = ["JOB_FAMILIES", "REGISTRY", "RULE_IDS", "RuleSpec", "evaluate", "run_families", "sort_findings"]
