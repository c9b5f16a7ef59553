"""Per-thread aggregates over one observation window: state shares, CPU, GIL, top frame, timeline. Pure."""

from __future__ import annotations

import bisect
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from dflash_contract.board import AppKeys
from dflash_diag.analysis.classify import (
    MIN_EVIDENCE_S,
    Classification,
    DeviceEvidence,
    LineLookup,
    OsEvidence,
    explain,
    gil_holder,
    is_autograd_worker_sample,
    runs_autograd_python,
    started_by_threading,
    waits_on_backward,
)
from dflash_diag.analysis.stages import StageAssignment, entry_frame, entry_key, infer_from_queues
from dflash_diag.model import (
    NA,
    PIPELINE_STAGES,
    Board,
    Frame,
    Maybe,
    Observation,
    ProcThreadSample,
    StackSample,
    Stage,
    ThreadSample,
    ThreadState,
    ThreadStats,
)
from dflash_diag.model.patterns import StagePatterns
from dflash_diag.model.stage import STAGE_ORDER

DEFAULT_PATTERNS = StagePatterns()  # frozen, so a shared default is safe


@dataclass(frozen=True, slots=True)
class ClassifiedThread:
    """One thread in one dump, with its state and why."""

    monotonic_s: float
    thread: ThreadSample
    state: ThreadState
    rule: str


def thread_identity(thread: ThreadSample) -> int:
    """Key of a thread across dumps: the kernel TID when py-spy knows it, else the pthread id."""
    return thread.os_thread_id if thread.os_thread_id is not None else thread.thread_id


class OsTimeline:
    """Per-thread /proc readings of a window: what the kernel said about thread T around time t."""

    def __init__(self, proc: Sequence[Sequence[ProcThreadSample]]) -> None:
        by_tid: dict[int, list[ProcThreadSample]] = {}
        for sweep in proc:
            for reading in sweep:
                by_tid.setdefault(reading.tid, []).append(reading)
        self._readings = {tid: sorted(rs, key=lambda r: r.monotonic_s) for tid, rs in by_tid.items()}
        self._times = {tid: [r.monotonic_s for r in rs] for tid, rs in self._readings.items()}

    def at(self, tid: int | None, t_s: float) -> OsEvidence | None:
        """CPU use over the readings around ``t_s`` (widened to >= MIN_EVIDENCE_S), the nearest reading's state."""
        if tid is None or tid not in self._readings:
            return None
        readings, times = self._readings[tid], self._times[tid]
        if len(readings) < 2:
            return None
        after = bisect.bisect_right(times, t_s)
        lo, hi = max(0, after - 1), min(len(times) - 1, after)
        if lo == hi:
            lo, hi = (hi - 1, hi) if hi > 0 else (lo, lo + 1)
        while times[hi] - times[lo] < MIN_EVIDENCE_S and (lo > 0 or hi < len(times) - 1):
            lo, hi = (lo - 1, hi) if lo > 0 and (hi == len(times) - 1 or t_s - times[lo] < times[hi] - t_s) \
                else (lo, hi + 1)
        span_s = times[hi] - times[lo]
        cpu = (readings[hi].run_ns - readings[lo].run_ns) / 1e9 / span_s if span_s > 0 else None
        nearest = min((readings[k] for k in {max(0, after - 1), min(len(times) - 1, after)}),
                      key=lambda r: abs(r.monotonic_s - t_s))
        return OsEvidence(cpu_share=None if cpu is None else max(0.0, cpu), span_s=span_s, state=nearest.state,
                          wchan=nearest.wchan, syscall=nearest.syscall)


def nearest_index(times: Sequence[float], t_s: float) -> int:
    """The index of the time in sorted, non-empty ``times`` nearest to ``t_s`` (the earlier one on a tie)."""
    k = bisect.bisect_left(times, t_s)
    return min((c for c in (k - 1, k) if 0 <= c < len(times)), key=lambda c: abs(times[c] - t_s))


GPU_EVIDENCE_S = 2.0  # an NVML reading this close to a sample describes it (NVML's own window is ~1 s)


class GpuTimeline:
    """NVML utilisation of each device over the window, and which device each thread works on."""

    def __init__(self, obs: Observation, board_devices: Mapping[str, int | None]) -> None:
        sweeps = obs.gpus if isinstance(obs.gpus, tuple) else ()
        self._times = [s[0].monotonic_s for s in sweeps if s]
        self._utils = [{g.index: g.util_pct for g in s if isinstance(g.util_pct, int | float)} for s in sweeps if s]
        self._board = board_devices
        self._process_gpu = _process_gpu(obs)

    def device_of(self, name: str) -> int | None:
        """The board's device for the thread ("cuda:1"; "cpu" is none), else the process's only GPU."""
        if name in self._board:
            return self._board[name]
        return self._process_gpu

    def at(self, index: int | None, t_s: float) -> DeviceEvidence | None:
        if index is None or not self._times:
            return None
        best = nearest_index(self._times, t_s)
        util = self._utils[best].get(index)
        if util is None or abs(self._times[best] - t_s) > GPU_EVIDENCE_S:
            return None
        return DeviceEvidence(index=index, util_pct=float(util))


def _process_gpu(obs: Observation) -> int | None:
    """The one GPU the process runs on, from NVML's process lists (or the only GPU when lists are unreadable)."""
    sweeps = obs.gpus if isinstance(obs.gpus, tuple) else ()
    if not sweeps or not sweeps[-1]:
        return None
    latest = sweeps[-1]
    listed = {g.index for g in latest if isinstance(g.processes, tuple) and any(p.pid == obs.pid for p in g.processes)}
    if len(listed) == 1:
        return next(iter(listed))
    if not listed and len(latest) == 1 and not isinstance(latest[0].processes, tuple):
        return latest[0].index
    return None


def cuda_loaded(obs: Observation) -> bool | None:
    """Whether the CUDA driver is mapped into the process (/proc/PID/maps); None when that was not read."""
    return obs.process.cuda_in_use if obs.process is not None else None


def classify_stacks(
    stacks: tuple[StackSample, ...],
    lines: LineLookup | None = None,
    *,
    os_timeline: OsTimeline | None = None,
    gpu_timeline: GpuTimeline | None = None,
    cuda: bool | None = None,
) -> dict[int, list[ClassifiedThread]]:
    """Every thread of every dump classified, grouped by :func:`thread_identity`, in time order (``cuda``: whether
    the process has the CUDA driver loaded, see :func:`classify.explain`)."""
    out: dict[int, list[ClassifiedThread]] = {}
    for sample in sorted(stacks, key=lambda s: s.monotonic_s):
        holder = gil_holder(sample)
        for thread in sample.threads:
            elsewhere = holder is not None and holder != thread.thread_id
            os_ev = os_timeline.at(thread.os_thread_id, sample.monotonic_s) if os_timeline is not None else None
            device = None
            if gpu_timeline is not None and thread.name:
                device = gpu_timeline.at(gpu_timeline.device_of(thread.name), sample.monotonic_s)
            c: Classification = explain(thread, os_ev, lines=lines, gil_held_elsewhere=elsewhere, device=device,
                                        cuda=cuda)
            out.setdefault(thread_identity(thread), []).append(
                ClassifiedThread(sample.monotonic_s, thread, c.state, c.rule)
            )
    return out


# --- autograd workers ---------------------------------------------------------------------------------------

ATTRIBUTION_SHARE = 0.6  # a worker belongs to the stage whose threads wait in backward in >= 60% of its busy samples
_DUMMY_NAME = re.compile(r"^Dummy-\d+$")


def _is_autograd_worker(rows: list[ClassifiedThread]) -> bool:
    """PyTorch's per-device autograd thread: its native engine frames, or a thread Python did not start
    (py-spy names those Dummy-N) that runs backward-only Python (checkpoint recompute, Function.backward)."""
    if any(is_autograd_worker_sample(r.thread) for r in rows):
        return True
    foreign = all(not started_by_threading(r.thread) for r in rows if any(not f.native for f in r.thread.frames))
    named_dummy = any(r.thread.name and _DUMMY_NAME.match(r.thread.name) for r in rows)
    return (foreign or named_dummy) and any(runs_autograd_python(r.thread) for r in rows)


@dataclass(frozen=True, slots=True)
class _Attribution:
    stage: Stage
    caller: str
    busy: int
    together: int


def _attribute_workers(
    grouped: dict[int, list[ClassifiedThread]], stage_of: Mapping[int, Stage], name_of: Mapping[int, str]
) -> dict[int, _Attribution]:
    """Worker -> the stage whose threads wait in backward() while the worker is busy (same dumps)."""
    waiting_at: dict[float, list[int]] = {}
    for ident, rows in grouped.items():
        if stage_of.get(ident, Stage.OTHER) is Stage.OTHER:
            continue
        for r in rows:
            if waits_on_backward(r.thread):
                waiting_at.setdefault(r.monotonic_s, []).append(ident)
    out: dict[int, _Attribution] = {}
    for ident, rows in grouped.items():
        if stage_of.get(ident, Stage.OTHER) is not Stage.OTHER or not _is_autograd_worker(rows):
            continue
        busy = [r for r in rows if r.state is not ThreadState.IDLE]
        callers: Counter[int] = Counter()
        for r in busy:
            callers.update(waiting_at.get(r.monotonic_s, ()))
        if not callers:
            continue
        stages = Counter({st: sum(n for c, n in callers.items() if stage_of[c] == st) for st in PIPELINE_STAGES})
        stage, together = stages.most_common(1)[0]
        if together and together >= ATTRIBUTION_SHARE * sum(stages.values()):
            caller = max((c for c in callers if stage_of[c] == stage), key=lambda c: callers[c])
            out[ident] = _Attribution(stage, name_of.get(caller, str(caller)), len(busy), callers[caller])
    return out


def _inherit_backward(
    grouped: dict[int, list[ClassifiedThread]], workers: Mapping[int, _Attribution], stage_of: Mapping[int, Stage],
    name_of: Mapping[int, str],
) -> None:
    """A stage thread waiting in backward() takes the state of its busy autograd worker in the same dump: the
    stage's time goes where its backward goes (checkpoint recompute, GPU wait...), not to "native"."""
    busy_at: dict[float, list[tuple[int, ClassifiedThread]]] = {}
    for ident in workers:
        for r in grouped[ident]:
            if r.state is not ThreadState.IDLE:
                busy_at.setdefault(r.monotonic_s, []).append((ident, r))
    for ident, rows in grouped.items():
        stage = stage_of.get(ident, Stage.OTHER)
        for k, r in enumerate(rows):
            if not waits_on_backward(r.thread):
                continue
            match = next((w for w in busy_at.get(r.monotonic_s, ()) if workers[w[0]].stage == stage), None)
            if match is not None:
                worker_ident, worker_row = match
                rows[k] = replace(r, state=worker_row.state,
                                  rule=f"backward on {name_of.get(worker_ident, '?')}: {worker_row.rule}")


def aggregate_threads(
    obs: Observation,
    patterns: StagePatterns = DEFAULT_PATTERNS,
    *,
    lines: LineLookup | None = None,
) -> tuple[ThreadStats, ...]:
    """One :class:`ThreadStats` per Python thread seen in ``obs.stacks``: targets, drafters, then the rest.

    ``lines`` defaults to the source lines the collector recorded with the observation. Evidence beyond the
    stacks: the /proc readings (CPU use, kernel waits), NVML utilisation of each thread's GPU, the board.
    """
    return aggregate(obs, patterns, lines=lines)[0]


def aggregate(
    obs: Observation,
    patterns: StagePatterns = DEFAULT_PATTERNS,
    *,
    lines: LineLookup | None = None,
) -> tuple[tuple[ThreadStats, ...], StageAssignment]:
    """:func:`aggregate_threads` plus how the stages were told apart (names, board roles or queue use)."""
    lookup = lines if lines is not None else obs.line_text
    board = obs.board
    board_names = _board_names(board)
    devices = _board_devices(board)
    roles = _board_roles(board)
    grouped = classify_stacks(obs.stacks, lookup, os_timeline=OsTimeline(obs.proc),
                              gpu_timeline=GpuTimeline(obs, devices), cuda=cuda_loaded(obs))
    name_of = {ident: _name_of(ident, rows, board_names) for ident, rows in grouped.items()}
    assignment = _assign_stages(grouped, name_of, patterns, roles, obs)
    stage_of = {ident: assignment.stages.get(ident, Stage.OTHER) for ident in name_of}
    workers = _attribute_workers(grouped, stage_of, name_of)
    _inherit_backward(grouped, workers, stage_of, name_of)
    stats = []
    for ident, rows in grouped.items():
        name = name_of[ident]
        timeline = tuple(r.state for r in rows)
        n = len(rows)
        counts = Counter(timeline)
        shares = MappingProxyType({state: counts.get(state, 0) / n for state in ThreadState})
        os_tid = rows[-1].thread.os_thread_id
        worker = workers.get(ident)
        stats.append(
            ThreadStats(
                name=name,
                os_thread_id=os_tid,
                stage=worker.stage if worker is not None else stage_of[ident],
                n_samples=n,
                shares=shares,
                cpu_pct=cpu_pct(obs, os_tid),
                runq_pct=runq_pct(obs, os_tid),
                gil_held_pct=100.0 * sum(1 for r in rows if r.thread.owns_gil) / n,
                top_frame=_top_frame(rows),
                gpu_index=devices.get(name),
                timeline=timeline,
                timeline_s=tuple(r.monotonic_s for r in rows),
                helper=worker is not None,
                attribution=(f"autograd worker: runs {worker.caller}'s backward ({worker.together} of "
                             f"{worker.busy} busy samples)") if worker is not None else "",
                entry=_entry(rows),
            )
        )
    stats.sort(key=lambda s: (STAGE_ORDER.get(s.stage, 3), s.helper, _natural(s.name)))
    return tuple(stats), assignment


def _assign_stages(grouped: Mapping[int, list[ClassifiedThread]], names: Mapping[int, str], patterns: StagePatterns,
                   roles: Mapping[str, str], obs: Observation) -> StageAssignment:
    """Names first (a thread the patterns miss takes the role the program published for it on the board), then
    board roles alone, then queue use (``analysis.stages``)."""
    by_name = {ident: patterns.stage_of(name) for ident, name in names.items()}
    by_role = {ident: Stage.of(roles.get(names[ident])) for ident, stage in by_name.items()
               if stage is Stage.OTHER and Stage.of(roles.get(names[ident])) in PIPELINE_STAGES}
    if any(s is not Stage.OTHER for s in by_name.values()):
        return StageAssignment(stages={**by_name, **by_role}, how="names")
    if by_role:
        return StageAssignment(stages=by_role, how="board")
    rows = {ident: [(r.thread, r.state) for r in group] for ident, group in grouped.items()}
    return infer_from_queues(rows, obs)


def _entry(rows: list[ClassifiedThread]) -> Frame | None:
    """The most frequent entry frame (function and file; its line is the newest seen)."""
    counts: Counter[tuple[str, str]] = Counter()
    newest: dict[tuple[str, str], Frame] = {}
    for row in rows:
        frame = entry_frame(row.thread)
        key = entry_key(frame)
        if key is not None and frame is not None:
            counts[key] += 1
            newest[key] = frame
    if not counts:
        return None
    return newest[max(counts, key=lambda k: counts[k])]


def _natural(name: str) -> tuple[Any, ...]:
    return tuple(int(tok) if tok.isdigit() else tok for tok in re.split(r"(\d+)", name))


def _name_of(ident: int, rows: list[ClassifiedThread], board_names: Mapping[int, str]) -> str:
    for row in reversed(rows):
        if row.thread.name:
            return row.thread.name
    if ident in board_names:
        return board_names[ident]
    return f"thread-{ident}"


def _top_frame(rows: list[ClassifiedThread]) -> Frame | None:
    """The most frequent innermost Python frame (ties: the most recent)."""
    counts: Counter[tuple[str, str, int]] = Counter()
    last_seen: dict[tuple[str, str, int], int] = {}
    frames: dict[tuple[str, str, int], Frame] = {}
    for i, row in enumerate(rows):
        frame = next((f for f in row.thread.frames if not f.native), None)
        if frame is None:
            continue
        key = (frame.name, frame.filename, frame.line)
        counts[key] += 1
        last_seen[key] = i
        frames[key] = frame
    if not counts:
        return None
    best = max(counts, key=lambda k: (counts[k], last_seen[k]))
    return frames[best]


def cpu_pct(obs: Observation, tid: int | None) -> Maybe[float]:
    """% of one core the thread used over the window, from the first and last /proc readings of it."""
    return _proc_pct(obs, tid, lambda p: p.run_ns)


def runq_pct(obs: Observation, tid: int | None) -> Maybe[float]:
    """% of the window the thread was runnable but waited for a CPU (schedstat), first to last /proc reading."""
    return _proc_pct(obs, tid, lambda p: p.runq_wait_ns)


def _proc_pct(obs: Observation, tid: int | None, ns_of: Callable[[ProcThreadSample], int]) -> Maybe[float]:
    if tid is None:
        return NA("py-spy did not report the thread's native id")
    readings = [(p.monotonic_s, ns_of(p)) for sweep in obs.proc for p in sweep if p.tid == tid]
    if len(readings) < 2:
        return NA("needs two /proc readings" if obs.proc else "no /proc readings")
    readings.sort()
    (t0, run0), (t1, run1) = readings[0], readings[-1]
    if t1 <= t0:
        return NA("needs two /proc readings at different times")
    return max(0.0, 100.0 * (run1 - run0) / 1e9 / (t1 - t0))


def _board_names(board: Board | None) -> Mapping[int, str]:
    if board is None:
        return {}
    return {int(tid): name for tid, name in board.threads.items() if isinstance(name, str)}


def _board_roles(board: Board | None) -> dict[str, str]:
    """Thread name -> role (a ``Stage`` value on the wire) from the board's ``app.threads[name].role``."""
    threads = board.app.get(AppKeys.THREADS) if board is not None and isinstance(board.app, Mapping) else None
    if not isinstance(threads, Mapping):
        return {}
    return {n: i[AppKeys.ROLE] for n, i in threads.items()
            if isinstance(n, str) and isinstance(i, Mapping) and isinstance(i.get(AppKeys.ROLE), str)}


_DEVICE = re.compile(r"^(?:cuda|gpu)?:?(\d+)$")


def _board_devices(board: Board | None) -> dict[str, int | None]:
    """Thread name -> GPU index from the board's ``app.threads[name].device`` ("cuda:1", 1); None for "cpu"."""
    if board is None:
        return {}
    threads = board.app.get(AppKeys.THREADS) if isinstance(board.app, Mapping) else None
    if not isinstance(threads, Mapping):
        return {}
    out: dict[str, int | None] = {}
    for name, info in threads.items():
        if not isinstance(name, str) or not isinstance(info, Mapping):
            continue
        device = info.get(AppKeys.DEVICE)
        if isinstance(device, int) and not isinstance(device, bool) and device >= 0:
            out[name] = device
        elif isinstance(device, str):
            match = _DEVICE.match(device.strip())
            if match:
                out[name] = int(match.group(1))
            elif device.strip().lower() == "cpu":
                out[name] = None  # known to run on the CPU: no GPU evidence applies
    return out


# --- CPU oversubscription ------------------------------------------------------------------------------------------
# A thread that computes in most of its samples but was runnable-and-waiting for a CPU a good part of the window
# (schedstat's run delay) did not get the CPU it wanted: more runnable threads than cores (other processes, or
# intra-op pools on top of the program's threads). Shares and stage verdicts then follow the scheduler as much as
# the code.
OVERSUBSCRIBED_RUNQ_PCT = 20.0  # mean run-queue wait of the computing threads, % of the window
COMPUTING_SHARE = 0.5  # samples in a working state (python, native, GIL wait, compile, recompute)
_WORKING = frozenset({ThreadState.PYTHON, ThreadState.NATIVE, ThreadState.GIL_WAIT, ThreadState.COMPILE,
                      ThreadState.CHECKPOINT})
MIN_OVERSUBSCRIPTION_SAMPLES = 5


@dataclass(frozen=True, slots=True)
class Oversubscription:
    """The computing threads waited for a CPU ``runq_pct`` of the window on average, and ran ``cpu_pct``."""

    threads: tuple[tuple[str, float, float, float], ...]  # (name, computing share, cpu %, run-queue wait %)
    runq_pct: float

    def text(self) -> str:
        """One line for a screen (it fits 100 columns): "CPUs oversubscribed: threads that compute waited for a
        core 48% of the window and ran 38-57% of one"."""
        low = min(t[2] for t in self.threads)
        high = max(t[2] for t in self.threads)
        ran = f"{low:.0f}%" if round(low) == round(high) else f"{low:.0f}-{high:.0f}%"
        return (f"CPUs oversubscribed: threads that compute waited for a core {self.runq_pct:.0f}% of the window and "
                f"ran {ran} of one")


def oversubscription(threads: Sequence[ThreadStats]) -> Oversubscription | None:
    """The computing threads' wait for a CPU, when it is high enough to say the CPUs are oversubscribed; None when
    the run queue was not read (no /proc) or the threads got the CPU they wanted."""
    rows = []
    for t in threads:
        if t.n_samples < MIN_OVERSUBSCRIPTION_SAMPLES or isinstance(t.runq_pct, NA) or isinstance(t.cpu_pct, NA):
            continue
        computing = sum(t.shares.get(s, 0.0) for s in _WORKING)
        if computing >= COMPUTING_SHARE:
            rows.append((t.name, computing, float(t.cpu_pct), float(t.runq_pct)))
    if not rows:
        return None
    runq = sum(r[3] for r in rows) / len(rows)
    if runq < OVERSUBSCRIBED_RUNQ_PCT:
        return None
    return Oversubscription(threads=tuple(sorted(rows, key=lambda r: -r[3])), runq_pct=runq)
