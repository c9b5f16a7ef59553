"""Immutable data that crosses threads and layers. Standard library only.

Everything the sources produce and the analysis consumes is one of these frozen dataclasses, so a
sampler thread can hand a snapshot to the UI thread without locks.
"""

from dflash_diag.model.analysis import Analysis
from dflash_diag.model.board import Board, WriterIdentity
from dflash_diag.model.common import NA, Maybe, is_na
from dflash_diag.model.evidence import ProcessFacts, SourceFile, SourceLine
from dflash_diag.model.findings import Finding, Headline, Severity
from dflash_diag.model.gpu import GPM_FIELDS, GpmReading, GpuProcess, GpuSample
from dflash_diag.model.observation import Observation
from dflash_diag.model.patterns import StagePatterns
from dflash_diag.model.proc import ProcessSample, ProcThreadSample
from dflash_diag.model.stacks import Frame, NativeProfile, NativeStack, PeerNative, StackSample, ThreadSample
from dflash_diag.model.stage import PIPELINE_STAGES, Stage, StageNames
from dflash_diag.model.states import ThreadState
from dflash_diag.model.stats import PipelineView, StageStats, ThreadStats

__all__ = [
    "NA",
    "PIPELINE_STAGES",
    "Analysis",
    "Board",
    "WriterIdentity",
    "Finding",
    "Frame",
    "GPM_FIELDS",
    "GpmReading",
    "GpuProcess",
    "GpuSample",
    "Headline",
    "Maybe",
    "NativeProfile",
    "PeerNative",
    "NativeStack",
    "Observation",
    "PipelineView",
    "ProcessFacts",
    "ProcThreadSample",
    "ProcessSample",
    "Severity",
    "Stage",
    "StageNames",
    "StagePatterns",
    "SourceFile",
    "SourceLine",
    "StackSample",
    "StageStats",
    "ThreadSample",
    "ThreadState",
    "ThreadStats",
    "is_na",
]
