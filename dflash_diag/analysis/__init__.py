"""Analysis: pure functions from an observation to what it means.

:func:`analyse` is the one entry point every command shares (``doctor``, ``top``, ``snapshot``, ``record``, the
replay of a saved observation): of one process (``analysis.process``: thread states and stages, the pipeline
view, the wait-for graph, every rule, the causal links between causes and symptoms, and the headline) or of a
job (``analysis.job``: each rank as a process, then the job's own rules across them). A pure function of the
observation, which records what it is judged with; it never raises: a part that fails becomes an ``NA`` pane or a
note in the analysis' ``errors``.
"""

from __future__ import annotations

from typing import overload

from dflash_diag.analysis.job import analyse_job
from dflash_diag.analysis.process import analyse_process
from dflash_diag.model import Analysis, Observation
from dflash_diag.model.job import JobAnalysis, JobObservation


@overload
def analyse(obs: Observation, *, previous_bottleneck: str = "") -> Analysis: ...


@overload
def analyse(obs: JobObservation, *, previous_bottleneck: str = "") -> JobAnalysis: ...


def analyse(obs: Observation | JobObservation, *, previous_bottleneck: str = "") -> Analysis | JobAnalysis:
    """Everything the tool can say about ``obs``, of a process or of a job. ``previous_bottleneck``: the stage a live
    screen of one process named last, for the verdict's hysteresis (``analysis.pipeline``); a one-off window (and
    its replay) has none."""
    if isinstance(obs, JobObservation):
        return analyse_job(obs)
    return analyse_process(obs, previous_bottleneck=previous_bottleneck)


__all__ = ["analyse", "analyse_job", "analyse_process"]
