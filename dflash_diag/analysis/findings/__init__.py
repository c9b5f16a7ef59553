"""Findings: named symptoms and root causes with the numbers behind them and the fix (docs/findings.md lists
every rule).

Each module is one rule family with a ``check(ctx) -> Iterator[Finding]``. :func:`evaluate` runs them all,
isolates failures (a rule that trips over an odd payload is reported, never hides the others) and sorts
the result most severe first, then by estimated impact. Linking causes to symptoms and the headline are
``analysis.causal``'s job; :func:`dflash_diag.analysis.analyse` does both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from dflash_diag.analysis.findings import (
    allocator,
    checkpoint,
    compile,
    cudagraphs,
    fastpath,
    gil,
    gpu,
    hang,
    hostsync,
    liveness,
    pipeline,
    process,
    stale,
    wasted,
)
from dflash_diag.analysis.findings._context import Context
from dflash_diag.analysis.stages import StageAssignment
from dflash_diag.model import Finding, Observation, PipelineView, Severity, ThreadStats
from dflash_diag.model.findings import NOTE

Rule = Callable[[Context], Iterator[Finding]]

RULE_FAMILIES: tuple[tuple[str, Rule], ...] = (
    ("process", process.check),
    ("liveness", liveness.check),
    ("hang", hang.check),
    ("pipeline", pipeline.check),
    ("fastpath", fastpath.check),
    ("stale", stale.check),
    ("checkpoint", checkpoint.check),
    ("compile", compile.check),
    ("cudagraphs", cudagraphs.check),
    ("allocator", allocator.check),
    ("gil", gil.check),
    ("hostsync", hostsync.check),
    ("gpu", gpu.check),
    ("wasted", wasted.check),
)

# Every rule id a finding may carry (docs/findings.md documents each; a test keeps the two in sync).
RULE_IDS: tuple[str, ...] = (
    "process-stopped", "process-zombie", "process-uninterruptible",
    "process-exited", "no-probes", "board-stale",
    "pipeline-hang", "thread-died",
    "pipeline-bottleneck-drafter", "pipeline-bottleneck-target",
    "gdn-torch-fallback", "flex-attention-eager",
    "stale-code",
    "checkpoint-grad-none", "checkpoint-reentrant", "checkpoint-recompute-heavy",
    "compile-recompile-limit", "compile-recompile-storm", "compile-graph-breaks", "warming-up",
    "compile-multi-thread",
    "cudagraph-skipped", "cudagraph-rerecord", "cudagraph-multi-thread",
    "alloc-churn", "alloc-retries", "alloc-fragmentation", "alloc-empty-cache",
    "gil-contention",
    "host-sync-storm",
    "gpu-underused",
    "wasted-full-vocab-logits",
    "rule-error",
)


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
                  assignment=assignment or StageAssignment(stages={}, how=""))
    found: list[Finding] = []
    for family, rule in RULE_FAMILIES:
        try:
            found.extend(rule(ctx))
        except Exception as exc:  # a rule bug must not hide the other findings
            found.append(
                Finding(
                    rule_id="rule-error",
                    severity=Severity.INFO,
                    claim=f"the {family} rules could not read this observation",
                    evidence=(("error", f"{type(exc).__name__}: {exc}"[:200]),),
                    remedy="Please report this with `dflash-diag snapshot PID` attached.",
                    kind=NOTE,
                )
            )
    return sort_findings(found)


def healthy(findings: tuple[Finding, ...]) -> bool:
    """No finding at warning level or above."""
    return all(f.severity < Severity.WARNING for f in findings)


__all__ = ["RULE_IDS", "evaluate", "healthy", "sort_findings"]
