"""What a sampler is asked to do (:class:`SamplerConfig`) and what it reads from (:class:`SamplerIO`).

One frozen config is built once by the command (``top``, ``doctor``, ``snapshot``) and handed to
:class:`~dflash_diag.sources.collect.Collector` or :class:`~dflash_diag.sources.collect.LiveSampler`; the readers
are real by default and replaced by fakes in tests.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from dflash_diag.model import NA, Board, GpuSample, Maybe, ProcessSample, ProcThreadSample, StackSample
from dflash_diag.model.sched import OsFacts, OutsideWait, SchedSample
from dflash_diag.sources.procfs import CpuTimes
from dflash_diag.sources.redaction import ProcessRedactor

MIN_RATE_HZ = 0.2
MAX_RATE_HZ = 50.0
# Adaptive ("auto") stack rate: 2 Hz when the trainer's CPUs are busy, up to 10 Hz when cores are idle
# (rate.py says when). 2 Hz cost a CPU-bound trainer nothing measurable on a 2-core box; docs/benchmarks.md.
AUTO_MIN_HZ = 2.0
AUTO_MAX_HZ = 10.0
# A one-off window the user asked for (snapshot's, doctor's short one): stacks this often, with the burst budget.
BURST_RATE_HZ = 20.0
DEFAULT_WINDOW_S = 30.0
PROC_INTERVAL_S = 0.5  # /proc: tens of µs per thread
NVML_INTERVAL_S = 1.0  # the driver's utilisation counters update about that often
BOARD_INTERVAL_S = 0.5  # probes publish at most at 2 Hz
SCHED_INTERVAL_S = 1.0  # the scheduler's view: a status read per thread (tens of µs), cgroup and PSI files
CHILD_INTERVAL_S = 1.0  # child dumps: ~10-40 ms of py-spy CPU each, a few a second at most
MAX_CHILDREN = 4


def check_rate(rate_hz: float | None) -> float | None:
    """A requested stack rate, clamped to [MIN_RATE_HZ, MAX_RATE_HZ]; None (auto) stays None."""
    if rate_hz is None:
        return None
    if not (isinstance(rate_hz, int | float) and math.isfinite(rate_hz) and rate_hz > 0):
        raise ValueError(f"rate_hz must be a finite number > 0, got {rate_hz}")
    return min(MAX_RATE_HZ, max(MIN_RATE_HZ, float(rate_hz)))


@dataclass(frozen=True, slots=True)
class SamplerConfig:
    """How to sample one process.

    ``rate_hz``: stack samples per second; None is "auto" (AUTO_MIN_HZ..AUTO_MAX_HZ by the CPU left free).
    Either way the rate is capped so py-spy stays within its CPU budget (``adaptive=False`` turns the caps off,
    for exact schedules in tests; ``burst`` relaxes them for a short one-off window). ``window_s``: how much
    history a live sampler keeps and returns.
    """

    rate_hz: float | None = None
    native: bool = False
    window_s: float = DEFAULT_WINDOW_S
    board_dir: str | None = None
    adaptive: bool = True
    # A one-off window of a few seconds (snapshot): py-spy may use half a core instead of a tenth, and a trainer
    # that saturates its cores does not slow the sampling (the dumps run at nice 10 and never pause it).
    burst: bool = False
    proc_interval_s: float = PROC_INTERVAL_S
    nvml_interval_s: float = NVML_INTERVAL_S
    board_interval_s: float = BOARD_INTERVAL_S
    # The process's Python children (multiprocessing workers, a data loader's workers): one non-blocking dump of up
    # to ``max_children`` of them (round robin) every ``child_interval_s``, so a wait on a child names its work.
    child_interval_s: float = CHILD_INTERVAL_S
    max_children: int = MAX_CHILDREN
    # The scheduler's view (context switches, CPUs allowed, cgroup quota and throttling, pressure, children) and
    # the waits that end in another process (sources.sched, sources.peers).
    sched_interval_s: float = SCHED_INTERVAL_S

    def __post_init__(self) -> None:
        object.__setattr__(self, "rate_hz", check_rate(self.rate_hz))
        for name in ("window_s", "proc_interval_s", "nvml_interval_s", "board_interval_s", "child_interval_s",
                     "sched_interval_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {value}")


class StackSource(Protocol):
    def dump(self) -> StackSample: ...


ChildLister = Callable[[int], tuple[int, ...]]  # the Python children of a PID (none when unreadable)
ChildDumper = Callable[[int], StackSample]  # one non-blocking dump of a child; raises AttachError when it fails


class GpuSource(Protocol):
    def sample(self) -> Maybe[tuple[GpuSample, ...]]: ...


BoardReader = Callable[[int], "Board | NA | None"]
ProcReader = Callable[[int], tuple[ProcThreadSample, ...]]  # raises AttachError(NO_PROCESS) when the pid is gone
ResourceReader = Callable[[int], ProcessSample]  # RSS, threads, fds; unreadable fields are None
CpuReader = Callable[[], "CpuTimes | None"]  # idle/total time of the CPUs the target may use; None: unknown
LineLookup = Callable[[str, int], "str | None"]
SchedSampleReader = Callable[[int], SchedSample]  # one sweep of the scheduler's view (sources.sched)
FactsReader = Callable[[int], OsFacts]  # environment, CPUs, libraries (sources.sched.read_os_facts)
PeerReader = Callable[[tuple[ProcThreadSample, ...]], tuple[OutsideWait, ...]]  # sources.peers, given a /proc sweep
Redactor = Callable[[Sequence[str]], Sequence[str]]


@dataclass(frozen=True, slots=True)
class SamplerIO:
    """The readers a sampler uses. None means the real one (py-spy, NVML, /proc, the board, files on disk)."""

    pyspy: StackSource | None = None
    nvml: GpuSource | None = None
    board_reader: BoardReader | None = None
    proc_reader: ProcReader | None = None
    resource_reader: ResourceReader | None = None
    child_lister: ChildLister | None = None
    child_dumper: ChildDumper | None = None
    cpu_reader: CpuReader | None = None
    lines: LineLookup | None = None
    sched_reader: SchedSampleReader | None = None
    facts_reader: FactsReader | None = None
    peer_reader: PeerReader | None = None
    redact_argv: Redactor | None = None
    redactor: ProcessRedactor | None = None  # None: the process's own (sources.redaction.redactor_for)
    cpu_cores: int | None = None  # cores the target may run on (its affinity) when not read from the kernel
    clock: Callable[[], float] = time.monotonic
    wall_clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
