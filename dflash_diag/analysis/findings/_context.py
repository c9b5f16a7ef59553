"""What every rule sees: the observation, its aggregates, and small helpers to read probe payloads safely.

Probe payloads come from another process: rules read them through these helpers, which return None
instead of raising on a missing key or a value of the wrong type, so one odd board never hides the
other findings.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from dflash_contract.board import STATUS_OK, AppKeys, PayloadKeys, ProbeName
from dflash_contract.settings import AREA_KERNEL, AREA_THREADS
from dflash_diag.analysis.hotspots import (
    changes_text,
    departures_text,
    passed_text,
    program_env_text,
    reads_text,
)
from dflash_diag.analysis.libc import chain_ends, libc_chains, threads_libc_text
from dflash_diag.analysis.mechanisms import SHOWN as MECHANISMS_SHOWN
from dflash_diag.analysis.mechanisms import mechanisms_text, native_mechanisms, python_mechanisms
from dflash_diag.analysis.native import thread_stacks
from dflash_diag.analysis.sampled import Sampled
from dflash_diag.analysis.sched import (
    CAPPED_CPU_SHARE,
    IDLE_CORES,
    idle_cores,
    io_rates,
    summary_of,
    thread_caps,
)
from dflash_diag.analysis.settings import (
    CHILD_PERMISSION_EFFECT,
    HELD_BY_CHILD,
    by_area,
    library_changes,
    non_default,
)
from dflash_diag.analysis.stages import StageAssignment
from dflash_diag.analysis.stderr import StderrFacts, parse_stderr
from dflash_diag.model import (
    NA,
    Analysis,
    GpuSample,
    Maybe,
    PipelineView,
    Stage,
    StageNames,
    ThreadState,
    ThreadStats,
)
from dflash_diag.model.evidence import is_library_file
from dflash_diag.model.job import JobObservation, RankSummary
from dflash_diag.model.kernels import KernelSummary
from dflash_diag.model.sched import SchedSummary, SettingReading
from dflash_diag.model.stacks import Frame, ThreadSample
from dflash_diag.model.waits import WaitGraph

# Shares computed from fewer stack samples than this are anecdotes, not rates: sample-based rules ignore
# such threads (a snapshot's single native dump must not raise "GIL wait 100%").
MIN_THREAD_SAMPLES = 5


@dataclass(frozen=True)
class Context(Sampled):
    """What every rule of one process sees: the window (``Sampled``: the observation, its per-thread aggregates and
    its rows), the pipeline view, the time it is judged at, and what ``analyse`` built once before the rules run:
    the stages' assignment, the kernel trace's summary and the wait-for graph."""

    pipeline: PipelineView
    now_wall_s: float
    assignment: StageAssignment = field(default_factory=lambda: StageAssignment(stages={}, how=""))
    # The summary of the process's torch.profiler trace, when one was given (``analysis.kernels``, made once).
    kernels: KernelSummary | None = None
    # What every thread computes or waits on (``analysis.waits``, built before the rules run), or why it could not be.
    wait_graph: Maybe[WaitGraph] = NA("not built")

    @property
    def waits(self) -> WaitGraph:
        """The wait-for graph; a rule that reads it when it could not be built fails (a rule-error note), as the
        analysis' own errors say why."""
        graph = self.wait_graph
        if isinstance(graph, NA):
            raise ValueError(f"no wait-for graph: {graph.reason}")
        return graph

    @cached_property
    def library_changes(self) -> tuple[SettingReading, ...]:
        """The library constants the program changed at run time (the settings probe), read once per analysis."""
        return library_changes(non_default(self.obs))

    @cached_property
    def stderr(self) -> StderrFacts:
        """Thread deaths and torch warnings in the process's stderr, when it goes to a file we may read."""
        process = self.obs.process
        return parse_stderr(process.stderr_tail if process is not None else None)

    def process_age_s(self) -> float | None:
        process = self.obs.process
        if process is None or process.start_wall_s is None:
            return None
        return max(0.0, self.now_wall_s - process.start_wall_s)

    @property
    def names(self) -> StageNames:
        """The words for this program's stages (its own, or the roles): every claim names stages through them."""
        return self.pipeline.names

    def stage_rows(self, stage: str) -> list[tuple[ThreadSample, ThreadState]]:
        """All samples of the stage's threads (every thread, however few its samples)."""
        out: list[tuple[ThreadSample, ThreadState]] = []
        for stats in self.threads:
            if stats.stage == stage:
                out.extend(self.stats_rows(stats))
        return out

    def stage_samples(self, stage: str) -> list[ThreadSample]:
        """Every sampled thread of a stage, by matching each stack's threads to the aggregates (frames only)."""
        return [t for sample in self.obs.stacks for t in sample.threads if thread_stage(self, t) == stage]

    def probe(self, name: str) -> Mapping[str, Any] | None:
        board = self.board
        return board.probe(name) if board is not None else None

    def first_probe(self, name: str) -> Mapping[str, Any] | None:
        board = self.first_board
        return board.probe(name) if board is not None else None

    def app(self) -> Mapping[str, Any]:
        board = self.board
        return board.app if board is not None and isinstance(board.app, Mapping) else {}

    def app_config(self) -> Mapping[str, Any]:
        config = self.app().get(AppKeys.CONFIG)
        return config if isinstance(config, Mapping) else {}

    def board_window_s(self) -> float:
        """Wall time between the first and the newest board of the window (0 with fewer than two)."""
        first, last = self.first_board, self.board
        if first is None or last is None or first is last:
            return 0.0
        return max(0.0, last.wall_time_s - first.wall_time_s)

    def stage_threads(self, stage: str) -> tuple[ThreadStats, ...]:
        return tuple(t for t in self.sampled() if t.stage == stage)

    def sampled(self) -> tuple[ThreadStats, ...]:
        """Threads with enough samples for their state shares to mean something."""
        return tuple(t for t in self.threads if t.n_samples >= MIN_THREAD_SAMPLES)

    def process_gpus(self) -> tuple[int, ...]:
        """GPUs this process uses: NVML lists it on them; or, when NVML names no process (PID namespaces), the
        only GPU of the machine if the process has the CUDA driver loaded."""
        sweeps = self.obs.gpus if isinstance(self.obs.gpus, tuple) else ()
        found = {gpu.index for sweep in sweeps for gpu in sweep
                 if isinstance(gpu.processes, tuple) and any(p.pid == self.obs.pid for p in gpu.processes)}
        if not found and self.obs.process is not None and self.obs.process.cuda_in_use:
            indices = {gpu.index for sweep in sweeps for gpu in sweep}
            hidden = any(_context_hidden(gpu) for sweep in sweeps for gpu in sweep)
            if len(indices) == 1 and hidden:
                found = indices
        return tuple(sorted(found))

    def on_cuda(self) -> bool | None:
        """Whether the process trains on CUDA: True, False, or None when nothing tells."""
        return on_cuda(self)


# A GPU holding this much memory holds some process's CUDA context (the driver's own reservation is well under it:
# 0.6 GiB on an idle H200).
HIDDEN_CONTEXT_BYTES = 1 << 30


def _context_hidden(gpu: GpuSample) -> bool:
    """NVML may not name a process that has a context on this GPU (a PID namespace): it lists other PIDs, cannot
    list them, or the GPU holds memory beyond the driver's own. A GPU that lists no process and holds no more has no
    context at all: a process that merely opened the device (``torch.cuda.is_available()``) is not on it."""
    processes = gpu.processes
    if not isinstance(processes, tuple) or processes:
        return True
    used = gpu.memory_used_bytes
    return isinstance(used, int) and used >= HIDDEN_CONTEXT_BYTES


def num(mapping: Mapping[str, Any] | None, key: str) -> float | None:
    """A finite number from a payload, else None (bools are not numbers here)."""
    if mapping is None:
        return None
    value = mapping.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def text(mapping: Mapping[str, Any] | None, key: str) -> str | None:
    if mapping is None:
        return None
    value = mapping.get(key)
    return value if isinstance(value, str) else None


def sub(mapping: Mapping[str, Any] | None, key: str) -> Mapping[str, Any]:
    if mapping is None:
        return {}
    value = mapping.get(key)
    return value if isinstance(value, Mapping) else {}


def items(mapping: Mapping[str, Any] | None, key: str) -> tuple[Any, ...]:
    if mapping is None:
        return ()
    value = mapping.get(key)
    return tuple(value) if isinstance(value, list | tuple) else ()


def pct(share: float) -> str:
    return f"{100.0 * share:.0f}%"


def bytes_rate(per_s: float) -> str:
    """A rate in bytes a second, as read: "1.2 MiB/s", "977 KiB/s"."""
    return f"{per_s / (1 << 20):.1f} MiB/s" if per_s >= 1 << 20 else f"{per_s / 1024:.0f} KiB/s"


def lower_bound(share: float, n_samples: int) -> float:
    """One-sigma lower bound of a sampled share: 3 of 6 samples is not the same evidence as 30 of 60."""
    if n_samples <= 0:
        return 0.0
    return max(0.0, share - math.sqrt(max(0.0, share * (1.0 - share)) / n_samples))


def stage_samples(threads: Iterable[ThreadStats]) -> int:
    return sum(t.n_samples for t in threads)


def mean_share(threads: Iterable[ThreadStats], state: ThreadState) -> float:
    values = [t.shares.get(state, 0.0) for t in threads]
    return sum(values) / len(values) if values else 0.0


def on_cuda(ctx: Context) -> bool | None:
    app = ctx.app()
    devices: list[str] = []
    for info in sub(app, AppKeys.THREADS).values():
        if isinstance(info, Mapping) and isinstance(info.get(AppKeys.DEVICE), str):
            devices.append(info[AppKeys.DEVICE])
    config_device = ctx.app_config().get(AppKeys.DEVICE)
    if isinstance(config_device, str):
        devices.append(config_device)
    if devices:
        return any(d.startswith("cuda") for d in devices)
    board = ctx.board
    if board is not None:
        allocator = board.probes.get(ProbeName.ALLOCATOR)
        if isinstance(allocator, Mapping):
            if allocator.get(PayloadKeys.STATUS) == STATUS_OK:
                return True
            if "no cuda" in str(allocator.get(PayloadKeys.REASON, "")).lower():
                return False
    # From outside: a process without the CUDA driver mapped, or with it mapped and no GPU device open (a CUDA
    # build of torch maps the driver at import), runs nothing on a GPU (yet).
    facts = ctx.obs.process
    if facts is not None and facts.cuda_in_use is False:
        return False
    return None


def version_tuple(version: str | None) -> tuple[int, ...] | None:
    """'2.11.0+cu128' -> (2, 11, 0); None when it does not parse."""
    if not version:
        return None
    match = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", version)
    if match is None:
        return None
    return tuple(int(g) for g in match.groups() if g is not None)


def frame_site(frame: Frame) -> str:
    return f"{frame.short_filename}:{frame.line} ({frame.name})" if frame.line else f"{frame.short_filename} ({frame.name})"


def own_frame(thread: ThreadSample) -> Frame | None:
    """The innermost Python frame of the program's own code (outside libraries)."""
    return next((f for f in thread.frames if not f.native and not is_library_file(f.filename)), None)


def line_site(ctx: Context, frame: Frame) -> str:
    """``name (file.py:LINE) `text``` for a claim: where, and the line's code where it was read."""
    text = (ctx.line_text(frame) or "").strip()
    where = f"{frame.name} ({frame.filename.rsplit('/', 1)[-1]}:{frame.line})"
    return f"{where} `{text[:80]}`" if text else where


def most_common_own_line(ctx: Context, threads: Iterable[ThreadSample]) -> str:
    """The program's own line these samples are at most often, as :func:`line_site` says it; "" when none."""
    counts: dict[Frame, int] = {}
    for thread in threads:
        own = own_frame(thread)
        if own is not None:
            counts[own] = counts.get(own, 0) + 1
    return line_site(ctx, max(counts, key=lambda f: counts[f])) if counts else ""


def python_frames(thread: ThreadSample) -> tuple[Frame, ...]:
    return tuple(f for f in thread.frames if not f.native)


def threads_text(names: list[str], limit: int = 4) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def stage_role(ctx: Context, stage: str) -> str:
    """A stage's name in claims: its role (``producer``/``consumer``), since a user's program has no stage called
    "target" or "drafter"; those words only when the program's own threads use them (``model.stage.StageNames``)."""
    return ctx.names.word(stage)


def stage_label(ctx: Context, stage: str) -> str:
    """How a stage is called in a claim: ``the consumer stage of `q``` when inferred from that queue's use, else
    ``the consumer stage`` (``the drafter stage`` in a program whose threads are called so)."""
    return ctx.names.label(stage)


def thread_stage(ctx: Context, thread: ThreadSample) -> Stage:
    """The stage of a thread in a stack sample, by matching it to the aggregated ThreadStats."""
    for stats in ctx.threads:
        if thread.os_thread_id is not None and stats.os_thread_id == thread.os_thread_id:
            return stats.stage
    for stats in ctx.threads:
        if thread.name is not None and stats.name == thread.name:
            return stats.stage
    return Stage.OTHER


def rows_that_matter(ctx: Context, min_rows: int,
                     skip: frozenset[ThreadState] = frozenset()) -> Iterator[tuple[ThreadStats, list[ThreadSample]]]:
    """(stats, samples) of each thread whose speed is the program's (the tool's own left out), with at least
    ``min_rows`` samples once those in a ``skip`` state are left out."""
    for stats in ctx.sampled():
        if stats.name.startswith("dflash-diag-") or not speed_matters(ctx, stats.name, stats.stage.value):
            continue
        rows = [thread for thread, state in ctx.stats_rows(stats) if state not in skip]
        if len(rows) >= min_rows:
            yield stats, rows


def speed_matters(ctx: Context, name: str, stage: str) -> bool:
    """A thread whose speed is the program's: it trains, or its stage limits throughput; with no stage verdict,
    every thread when none trains."""
    trains = ctx.waits.trains
    if name in trains:
        return True
    limiting = ctx.pipeline.bottleneck
    if limiting in (Stage.TARGET, Stage.DRAFTER):
        return stage == limiting
    return not trains


def speed_threads(ctx: Context) -> list[ThreadStats]:
    """The sampled threads whose speed is the program's (:func:`speed_matters`), the tool's own left out."""
    return [t for t in ctx.sampled() if speed_matters(ctx, t.name, t.stage.value)
            and not t.name.startswith("dflash-diag-")]


def thread_label(thread: ThreadSample) -> str:
    if thread.name:
        return thread.name
    return f"tid {thread.os_thread_id if thread.os_thread_id is not None else thread.thread_id}"


@dataclass(frozen=True)
class JobContext:
    """What the job rules see (``findings.job``): the window of every rank, each rank's analysis and its summary row,
    and the time the job is judged at."""

    job: JobObservation
    analyses: tuple[Analysis, ...]
    summaries: tuple[RankSummary, ...]
    now_wall_s: float

    def analysis_of(self, summary: RankSummary) -> Analysis | None:
        for s, a in zip(self.summaries, self.analyses, strict=True):
            if s is summary:
                return a
        return None


def slope_per_s(points: Sequence[tuple[float, float]]) -> float:
    """Least-squares slope of ``(seconds, value)`` points: value per second (0 without a spread in time)."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var if var > 0 else 0.0


def halves_slopes(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """The slopes of the window's earlier and later halves, split at its middle in time: growth that levels off
    (caches filling to their size) is not growth without bound."""
    middle = (points[0][0] + points[-1][0]) / 2
    early = [p for p in points if p[0] <= middle]
    late = [p for p in points if p[0] >= middle]
    return (slope_per_s(early) if len(early) >= 2 else 0.0, slope_per_s(late) if len(late) >= 2 else 0.0)


# The later half of the window grows at least this fraction as fast as the earlier one: sustained, not levelling off.
SUSTAINED_RATIO = 0.5


def steady_growth(early_per_s: float, late_per_s: float, min_per_s: float) -> bool:
    """Growth over both halves of a window (:func:`halves_slopes`): the later half at least ``min_per_s`` and
    ``SUSTAINED_RATIO`` of the earlier (else it levels off: something filling up to its size), the earlier not
    falling (else a step's peak was freed and taken again: a healthy EMA twin attached on an H100's host read -518
    then +262 MB/s)."""
    return late_per_s >= min_per_s and late_per_s >= SUSTAINED_RATIO * early_per_s and early_per_s >= 0


def duration_text(seconds: float) -> str:
    """``45 s``, ``12 min``, ``3.5 h``: how long until a resource runs out, said at the scale that reads."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"



def libc_text(ctx: Context, tids: Collection[int]) -> str:
    """The threads' C library chains from doctor's native look (``libc.threads_libc_text``), with the process's
    environment the mechanisms read and its I/O counters over the window, and a child's permission watch where the
    chains end in opens or reads; "" without a look or a chain."""
    chains = libc_chains(thread_stacks(ctx.obs.native, tids))
    text = threads_libc_text(ctx.obs.native, tids, dict(ctx.obs.native_env), io_rates(ctx.obs), chains=chains)
    return text + permission_watches_text(ctx, chain_ends(chains)) if text else ""


_OPENS_OR_READS = re.compile(r"(open|read|execve)")


def permission_watches_text(ctx: Context, calls: Collection[str]) -> str:
    """The fanotify permission watches the process's children hold (``sources.sched.children_permission_watches``),
    where the thread waits in or works at calls they hold (opens, reads: system calls or their C library
    wrappers): each such call waits for the child's answer, which no stack and no file system shows; ""
    otherwise."""
    if not any(_OPENS_OR_READS.search(call) for call in calls):
        return ""
    held = [r for r in by_area(non_default(ctx.obs), AREA_KERNEL)
            if r.name == "file-system watch" and HELD_BY_CHILD in r.value]
    if not held:
        return ""
    return f"; {'; '.join(r.value for r in held[:2])}: {CHILD_PERMISSION_EFFECT}"


def known_mechanisms_text(ctx: Context, rows: Sequence[tuple[ThreadSample, ThreadState]],
                          tids: Collection[int]) -> str:
    """What the code the rows' time goes to is known to do and what decides it (``mechanisms``): from their
    library Python frames, and below them from doctor's native look of the threads ``tids``; "" when none runs
    there enough to say."""
    seen = {s.mechanism.text: s for s in (*python_mechanisms(rows), *native_mechanisms(thread_stacks(ctx.obs.native,
                                                                                                     tids)))}
    return mechanisms_text(sorted(seen.values(), key=lambda s: -s.share)[:MECHANISMS_SHOWN])


def settings_text(ctx: Context, rows: Sequence[tuple[ThreadSample, ThreadState]]) -> str:
    """The settings the code the rows run in reads: the environment variables its installed modules name
    (``Observation.env_reads``), the library constants the program changed (the settings probe), each said only
    where that code runs, the arguments the program passes from its configuration to a library that code is in
    (``passed_text``), and a pool-size setting that holds the rows' native ops narrower than the idle CPUs
    (``caps_text``); "" when none."""
    tids = {t.os_thread_id for t, _ in rows if t.os_thread_id is not None}
    stacks = thread_stacks(ctx.obs.native, tids)
    set_by_program = ctx.obs.os_facts.env_set_by_program if ctx.obs.os_facts is not None else ()
    return (reads_text(ctx.obs.env_reads, rows) + changes_text(ctx.library_changes, rows)
            + passed_text(ctx.obs.files, rows, stacks) + departures_text(ctx.obs.files, rows)
            + program_env_text(set_by_program, ctx.obs.files, rows, stacks) + caps_text(ctx, rows))


# The rows' share in native code (torch's ops) from which a pool-size setting below the idle CPUs is said beside
# their time (their threads on a CPU CAPPED_CPU_SHARE of the window, as `cpu-threads-capped` reads them).
CAPS_NATIVE_SHARE = 0.5


def caps_text(ctx: Context, rows: Sequence[tuple[ThreadSample, ThreadState]]) -> str:
    """"; OMP_NUM_THREADS=1 (environment) holds torch's ops to 1 thread while 0.9 of the 2 CPUs sit idle", where
    the rows' threads compute flat out in native code (half their samples or more, on a CPU 70% of the window) and
    the process leaves half a CPU or more idle that no other task wanted (``cpu-threads-capped`` says it whole);
    "" otherwise. Information beside the time, not a cause: a program kept to one thread on purpose looks the
    same."""
    summary = summary_of(ctx.obs)
    if not rows or not isinstance(summary, SchedSummary) or summary.cores < 2 or ctx.on_cuda() is True:
        return ""
    native = sum(1 for _, state in rows if state is ThreadState.NATIVE) / len(rows)
    tids = {t.os_thread_id for t, _ in rows if t.os_thread_id is not None}
    cpu = [t.cpu_share for t in summary.threads if t.tid in tids]
    if native < CAPS_NATIVE_SHARE or not cpu or min(cpu) < CAPPED_CPU_SHARE:
        return ""
    idle = idle_cores(ctx.obs, summary)
    caps = thread_caps(by_area(non_default(ctx.obs), AREA_THREADS), summary.cores)
    if idle < IDLE_CORES or not caps:
        return ""
    reading, width = caps[0]
    return (f"; {reading.text()} ({reading.source}) holds torch's ops to {width} thread{'s' if width != 1 else ''} "
            f"while {idle:.1f} of the {summary.cores:g} CPUs sit idle")
