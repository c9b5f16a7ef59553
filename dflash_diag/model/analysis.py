"""The result of analysing one observation: per-thread aggregates, the pipeline view, the linked findings and the
headline. Produced by :func:`dflash_diag.analysis.analyse`, read by ``doctor``, ``top`` and ``snapshot`` alike."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from dflash_diag.model.common import NA, Maybe
from dflash_diag.model.findings import Finding, Headline, healthy
from dflash_diag.model.kernels import KernelSummary
from dflash_diag.model.observation import Observation
from dflash_diag.model.stats import PipelineView, ThreadStats
from dflash_diag.model.waits import WaitGraph

# What the process is doing as a whole, judged from the window (the headline's first word).
PHASE_STEADY = "steady"
PHASE_WARMING_UP = "warming-up"
PHASE_STOPPED = "stopped"  # SIGSTOP, zombie, uninterruptible: /proc says it cannot run
PHASE_HUNG = "hung"
PHASE_EXITED = "exited"


@dataclass(frozen=True, slots=True)
class Analysis:
    observation: Observation
    threads: tuple[ThreadStats, ...]
    pipeline: Maybe[PipelineView]
    findings: tuple[Finding, ...]  # linked and ranked: the headline's findings first
    headline: Headline | None  # None: nothing to report
    phase: str = PHASE_STEADY
    errors: tuple[str, ...] = ()  # parts of the analysis that failed (shown, never raised)
    # What every thread computes or waits on, and the path to the root (``analysis.waits``).
    waits: Maybe[WaitGraph] = NA("not computed")
    # The summary of the process's torch.profiler trace (``analysis.kernels``), when the observation holds one.
    kernels: KernelSummary | None = None

    @property
    def healthy(self) -> bool:
        """No finding at warning level or above."""
        return healthy(self.findings)


class Diagnosis(Protocol):
    """What the analysis of a process (:class:`Analysis`) and of a job (``model.job.JobAnalysis``) share, read alike by
    every report: the linked findings, the headline, the phase, the parts that failed, and whether it is healthy."""

    @property
    def findings(self) -> tuple[Finding, ...]: ...

    @property
    def headline(self) -> Headline | None: ...

    @property
    def phase(self) -> str: ...

    @property
    def errors(self) -> tuple[str, ...]: ...

    @property
    def healthy(self) -> bool: ...
