"""Process-wide settings: every one away from its default is shown (information), and one becomes the cause of a
slowdown only where its cost is measured in this process:

- ``settings-changed``: the list, each with its default and what it changes (``analysis.settings``);
- ``gc-pauses``: the garbage collector stops every thread a measured share of the time (the ``settings`` probe
  times each collection; from outside, the samples at explicit ``gc.collect()`` calls);
- ``gil-switch-interval``: ``sys.setswitchinterval`` away from 5 ms, and threads measurably wait for the GIL or
  hand it over thousands of times a second;
- ``torch-debug-mode``: anomaly detection, the autograd profiler, the CUDA sync debug mode or
  ``CUDA_LAUNCH_BLOCKING`` left on, weighed by the time the training threads spend in the ops it slows;
- ``native-call-log``: a library told by its variable to log every call (``MKL_VERBOSE``, ``ONEDNN_VERBOSE``, cuDNN's
  and cuBLAS's API logs, ``NCCL_DEBUG=INFO``), weighed by the process's write calls a second over the window
  (/proc/PID/io: the log runs) and the training threads' time in the ops it logs;
- ``malloc-debug``: glibc's allocator checking or filling every block (``MALLOC_PERTURB_``, ``MALLOC_CHECK_`` with
  its debug library loaded, the same through ``GLIBC_TUNABLES``), weighed by the training threads' time in ops;
- ``interpreter-hook``: the interpreter calls something on every line, call or allocation (tracemalloc, a trace or
  profile function, sys.monitoring tools, the development mode or a debug allocator), weighed by the share of the
  samples the threads it runs in spend running Python code, where every such event happens.

Thread-pool sizes (``OMP_NUM_THREADS``, ``torch.set_num_threads``) are weighed by ``cpu-oversubscribed``
(``findings/scheduler.py``), which names them as what keeps the CPUs oversubscribed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from dflash_contract.board import ProbeName, SettingsKeys
from dflash_contract.settings import AREA_COLLECTOR, AREA_GIL, DEBUG_ALLOCATORS, DEFAULT_SWITCH_INTERVAL_S
from dflash_diag.analysis.findings._context import (
    Context,
    bytes_rate,
    num,
    pct,
    speed_matters,
    speed_threads,
    sub,
)
from dflash_diag.analysis.findings._registry import RuleSpec
from dflash_diag.analysis.findings.diagnostics import stack_capture_from_native
from dflash_diag.analysis.findings.gil import probe_wait
from dflash_diag.analysis.frames import user_frames
from dflash_diag.analysis.hotspots import is_off_value
from dflash_diag.analysis.native import MIN_SAMPLES as NATIVE_MIN_SAMPLES
from dflash_diag.analysis.native import share_in, thread_stacks
from dflash_diag.analysis.sched import summary_of, write_rate
from dflash_diag.analysis.settings import SYNCS_PROBE_SYNC_MODE, by_area, non_default, sync_mode_is_ours
from dflash_diag.model import Finding, Frame, Severity, ThreadSample, ThreadState
from dflash_diag.model.evidence import DeclaredDefault, SourceFile, is_library_file
from dflash_diag.model.findings import CAUSE, NOTE
from dflash_diag.model.sched import SchedSummary, SettingReading
from dflash_diag.model.stage import PIPELINE_STAGES

SHOWN = 8  # settings listed in the note's claim (all are in its evidence)
# The collector stopping every thread this share of the window is a measured cost worth acting on. Healthy programs
# that make garbage at the default thresholds were measured at 3-11% (the casebook's twins: a 5 s window holds a few
# full collections of up to 0.3 s each, and one more or less moves the share by several points); the programs whose
# collector is the cause, at 28-93%.
GC_WARNING_SHARE = 0.15
GC_INFO_SHARE = 0.03
GC_MIN_COLLECTIONS = 2  # one pause alone may be a one-off (a gc.collect() at a checkpoint)
_GC_COLLECT_LINE = re.compile(r"\bgc\.collect\s*\(|^\s*collect\s*\(")
# A switch interval measurably hurts when threads wait for the GIL this share of the time (the probe's contention,
# or the sampled GIL waits of the threads that want Python), or hand it over this often (per Python thread).
GIL_WAIT_SHARE = 0.10
HANDOFFS_PER_S = 1000.0
# A debug mode slows every op it touches: a cost when the training threads spend this share of their samples in
# ops (or, for CUDA_LAUNCH_BLOCKING, in GPU waits: a sync after every launch).
DEBUG_OPS_SHARE = 0.30
LAUNCH_BLOCKING_WAIT_SHARE = 0.15
# From outside, anomaly detection is inferred when the training threads spend this share of their samples in a Python
# stack capture that native code called (what anomaly mode does per op; nothing else in torch does it per op).
ANOMALY_STACKS_SHARE = 0.15
_WORK = (ThreadState.PYTHON, ThreadState.NATIVE, ThreadState.COMPILE, ThreadState.CHECKPOINT, ThreadState.GPU_WAIT)
_TORCH_OP_FILES = ("torch/nn/", "torch/autograd/", "torch/_tensor.py", "torch/optim/", "torch/functional.py",
                   "torch/utils/checkpoint.py", "torch/_ops.py", "torch/profiler/")
_ANOMALY_WARNING = "Anomaly Detection has been enabled"

RULES = (
    RuleSpec("settings-changed", kind=NOTE, slows=False),
    RuleSpec("gc-pauses"),
    RuleSpec("gil-switch-interval", sampled=True, produces=("gil-contention",)),
    RuleSpec("torch-debug-mode", sampled=True),
    RuleSpec("native-call-log", sampled=True),
    # In a child's environment it makes the child slow, which a thread waiting on that child shows.
    RuleSpec("malloc-debug", sampled=True, produces=("process-wait",)),
    RuleSpec("default-dtype-float64", sampled=True),
    RuleSpec("interpreter-hook", sampled=True),
    RuleSpec("cpu-kernels-slowed", sampled=True),
)


def check(ctx: Context) -> Iterator[Finding]:
    readings = non_default(ctx.obs)
    set_by_program = ctx.obs.os_facts.env_set_by_program if ctx.obs.os_facts is not None else ()
    departures = config_departures(ctx.obs.files)
    if readings or set_by_program or departures:
        yield _changed(readings, set_by_program, departures)
    yield from _gc(ctx, readings)
    yield from _switch_interval(ctx, readings)
    yield from _debug_modes(ctx, readings)
    yield from _native_call_logs(ctx, readings)
    yield from _malloc_debug(ctx, readings)
    yield from _default_dtype(ctx, readings)
    yield from _interpreter_hooks(ctx, readings)
    yield from _kernel_paths(ctx, readings)


# --- the list ----------------------------------------------------------------------------------------------------


def config_departures(files: Sequence[SourceFile]) -> tuple[tuple[SourceFile, DeclaredDefault], ...]:
    """The code's declared defaults the run's configuration sets otherwise (``SourceFile.overridden``), one per
    name, an option turned off first (a cache, a planner, a tag: the commonest way a profile slows a library)."""
    seen: dict[str, tuple[SourceFile, DeclaredDefault]] = {}
    for file in files:
        for d in file.overridden:
            seen.setdefault(d.name, (file, d))
    return tuple(sorted(seen.values(), key=lambda fd: not is_off_value(fd[1].configured)))


def departure_text(file: SourceFile, d: DeclaredDefault) -> str:
    """"`max_pacing_mbit` = 300 in run.toml (the code's default 0 at runprofile.py:21: 0: no cap ...)"."""
    note = f": {d.note}" if d.note else ""
    return (f"`{d.name}` = {d.configured} in {d.configured_in} (the code's default {d.default} at "
            f"{file.path.rsplit('/', 1)[-1]}:{d.line}{note})")


def _changed(readings: tuple[SettingReading, ...], set_by_program: tuple[str, ...] = (),
             departures: tuple[tuple[SourceFile, DeclaredDefault], ...] = ()) -> Finding:
    """The settings away from their defaults, the variables outside the catalogue the program set in its own
    environment since it started (names only: what they do is not known here), and the values the run's
    configuration sets away from the code's own declared defaults."""
    names = [r.text() for r in readings]
    parts = []
    if readings:
        parts.append(f"{len(readings)} process-wide setting{'s differ' if len(readings) != 1 else ' differs'} from "
                     f"{'their' if len(readings) != 1 else 'its'} default: " + ", ".join(names[:SHOWN])
                     + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else ""))
    if set_by_program:
        parts.append(f"the program set {len(set_by_program)} variable{'s' if len(set_by_program) != 1 else ''} the "
                     "settings catalogue does not know in its own environment at run time: " + ", ".join(set_by_program))
    if departures:
        parts.append(f"the run's configuration sets {len(departures)} value{'s' if len(departures) != 1 else ''} "
                     "away from the code's declared defaults: " + ", ".join(
                         f"`{d.name}` = {d.configured} (default {d.default})" for _, d in departures[:SHOWN])
                     + (f" and {len(departures) - SHOWN} more" if len(departures) > SHOWN else ""))
    claim = "; ".join(parts)
    evidence = tuple((r.text(), f"{r.source}; default {r.default}: {r.effect}" + (f"; {r.detail}" if r.detail else ""))
                     for r in readings)
    evidence += tuple((f"{d.name} = {d.configured}", departure_text(f, d)) for f, d in departures)
    if set_by_program:
        evidence += (("set by the program at run time", ", ".join(set_by_program) + ": names only (values are not "
                      "read); what each does is not known here, most often a library's switch exported before it "
                      "loads"),)
    return Finding(rule_id="settings-changed", severity=Severity.INFO, claim=claim, evidence=evidence,
                   remedy="Information: each is the cause of a slowdown only where a finding measures its cost. "
                          "Keep the ones you chose; remove what was left on from debugging.", kind=NOTE)


# --- the garbage collector ---------------------------------------------------------------------------------------


def _collector(ctx: Context) -> tuple[float, int, float | None, Mapping[str, Any]] | None:
    """(share of the window collections took, collections, longest pause ms, the payload) from the probe."""
    last = ctx.probe(ProbeName.SETTINGS)
    collector = sub(last, SettingsKeys.COLLECTOR)
    if not collector:
        return None
    first = sub(ctx.first_probe(ProbeName.SETTINGS), SettingsKeys.COLLECTOR)
    span = ctx.board_window_s()
    total, total0 = num(collector, SettingsKeys.PAUSE_S_TOTAL), num(first, SettingsKeys.PAUSE_S_TOTAL)
    count, count0 = num(collector, SettingsKeys.COLLECTIONS), num(first, SettingsKeys.COLLECTIONS)
    if span >= 1.0 and total is not None and total0 is not None and count is not None and count0 is not None \
            and count >= count0:
        share, n = min(1.0, max(0.0, total - total0) / span), int(count - count0)
    else:
        share = num(collector, SettingsKeys.RECENT_PAUSE_SHARE) or 0.0
        n = int(num(collector, SettingsKeys.RECENT_COLLECTIONS) or 0)
    return share, n, num(collector, SettingsKeys.PAUSE_MAX_MS), collector


def _explicit_collect_share(ctx: Context) -> tuple[float, str]:
    """Share of the stack dumps in which some thread runs an explicit ``gc.collect()``, and where (outside view)."""
    hits = 0
    sites: dict[str, int] = {}
    for sample in ctx.obs.stacks:
        site = next((s for s in (_collect_site(ctx, t) for t in sample.threads) if s), "")
        if site:
            hits += 1
            sites[site] = sites.get(site, 0) + 1
    total = len(ctx.obs.stacks)
    where = max(sites, key=lambda k: sites[k]) if sites else ""
    return (hits / total if total else 0.0), where


def _collect_site(ctx: Context, thread: ThreadSample) -> str:
    own = user_frames(thread)
    if not own:
        return ""
    text = ctx.line_text(own[0]) or ""
    if _GC_COLLECT_LINE.search(text):
        return f"{own[0].name} ({own[0].short_filename}:{own[0].line})"
    return ""


def _gc(ctx: Context, readings: tuple[SettingReading, ...]) -> Iterator[Finding]:
    probe = _collector(ctx)
    outside_share, outside_site = _explicit_collect_share(ctx)
    share = probe[0] if probe is not None else 0.0
    n = probe[1] if probe is not None else 0
    measured_by = "timed by the settings probe" if probe is not None else ""
    if probe is None or (outside_share > share and len(ctx.obs.stacks) >= 10):
        if outside_share > share:
            share, measured_by = outside_share, "samples at an explicit gc.collect() call"
    if share < GC_INFO_SHARE or (probe is not None and n < GC_MIN_COLLECTIONS and not outside_site):
        return
    settings = by_area(readings, AREA_COLLECTOR)
    why = sorted((r for r in settings if r.source == "call" or r.name.startswith("gc.")),
                 key=lambda r: r.name != "gc.callbacks")  # the program's own callbacks run inside every pause
    claim = f"the garbage collector stops every thread {pct(share)} of the time"
    if probe is not None and n:
        claim += f" ({n} collections in the window" + (f", up to {probe[2]:.0f} ms each)" if probe[2] else ")")
    if outside_site:
        claim += f"; the program calls gc.collect() at {outside_site}"
    elif why:
        claim += ", with " + ", ".join(r.text() for r in why[:2])
    evidence: list[tuple[str, str]] = [("pause share", f"{pct(share)} of the window ({measured_by})")]
    if probe is not None:
        collector = probe[3]
        by_gen = collector.get(SettingsKeys.COLLECTIONS_BY_GENERATION)
        if isinstance(by_gen, list) and len(by_gen) == 3:
            evidence.append(("collections by generation (since the probe started)", " / ".join(str(g) for g in by_gen)))
        explicit = num(collector, SettingsKeys.EXPLICIT_COLLECTS)
        if explicit:
            evidence.append(("gc.collect() calls (since the probe started)", f"{explicit:.0f}"))
    if outside_site:
        evidence.append(("explicit collection", f"{pct(outside_share)} of the stack samples at {outside_site}"))
    for r in settings:
        evidence.append((r.text(), f"{r.source}; default {r.default}" + (f"; {r.detail}" if r.detail else "")))
    yield Finding(
        rule_id="gc-pauses", severity=Severity.WARNING if share >= GC_WARNING_SHARE else Severity.INFO,
        claim=claim, evidence=tuple(evidence),
        remedy="Make the pauses shorter and rarer: no heavy work in gc.callbacks (they run inside every pause), "
               "gc.collect() out of the step (or every N steps), the default thresholds (or higher ones with "
               "gc.set_threshold), and gc.freeze() once after loading long-lived data so collections stop walking it.",
        impact=share, kind=CAUSE)


# --- the switch interval -----------------------------------------------------------------------------------------


def _switch_interval(ctx: Context, readings: tuple[SettingReading, ...]) -> Iterator[Finding]:
    setting = next((r for r in by_area(readings, AREA_GIL) if r.name == "sys.getswitchinterval()"), None)
    if setting is None:
        return
    interval = num(sub(ctx.probe(ProbeName.SETTINGS), SettingsKeys.INTERPRETER), SettingsKeys.SWITCH_INTERVAL_S)
    gil = ctx.probe(ProbeName.GIL)
    seen_wait = probe_wait(gil, ctx.first_probe(ProbeName.GIL))
    contention = seen_wait.share if seen_wait is not None else None
    gil_wait = contention or 0.0
    wanting = [t for t in ctx.sampled() if t.shares.get(ThreadState.PYTHON, 0.0)
               + t.shares.get(ThreadState.GIL_WAIT, 0.0) >= 0.2 and not t.name.startswith("dflash-diag-")]
    sampled_wait = (sum(t.shares.get(ThreadState.GIL_WAIT, 0.0) for t in wanting) / len(wanting)) if wanting else 0.0
    summary = summary_of(ctx.obs)
    handoffs = None
    if isinstance(summary, SchedSummary):
        python = [t for t in summary.threads if t.python and t.voluntary_per_s is not None and t.cpu_share >= 0.05]
        handoffs = (sum(t.voluntary_per_s or 0.0 for t in python) / len(python)) if python else None
    cost = max(gil_wait, sampled_wait)
    small = interval is not None and interval < DEFAULT_SWITCH_INTERVAL_S
    thrash = small and handoffs is not None and handoffs >= HANDOFFS_PER_S
    if cost < GIL_WAIT_SHARE and not thrash:
        return
    who = next((r for r in readings if r.name == "sys.setswitchinterval"), None)
    claim = f"{setting.name.removesuffix('()').replace('get', 'set')}({setting.value.removesuffix(' s')}) " \
            f"(default {setting.default})" + (f" {who.detail}" if who is not None else "")
    if small:
        claim += ": threads that want the GIL take it from each other that often"
    else:
        claim += ": a thread keeps the GIL that long while others wait for it"
    parts = []
    if cost >= GIL_WAIT_SHARE:
        parts.append(f"threads wait for the GIL {pct(cost)} of the time")
    if handoffs is not None and small:
        parts.append(f"each Python thread gives up its CPU {handoffs:,.0f} times a second")
    claim += "; " + " and ".join(parts)
    evidence = [("switch interval", f"{setting.value} (default {setting.default})")]
    if contention is not None:
        evidence.append(("GIL contention (probe)", pct(gil_wait)))
    if wanting:
        evidence.append(("GIL waits in the samples", f"{pct(sampled_wait)} of the samples of the threads that run Python"))
    if handoffs is not None:
        evidence.append(("voluntary context switches per Python thread", f"{handoffs:,.0f}/s"))
    if who is not None:
        evidence.append(("set by", who.detail))
    stages = tuple(sorted({t.stage for t in wanting if t.shares.get(ThreadState.GIL_WAIT, 0.0) >= 0.1} - {"other"}))
    yield Finding(
        rule_id="gil-switch-interval", severity=Severity.WARNING, claim=claim, evidence=tuple(evidence),
        remedy="Remove the sys.setswitchinterval call (the default 5 ms suits training loops); if threads starve for "
               "the GIL, cut the Python work of the thread that holds it instead.",
        impact=max(cost, 0.1 if thrash else 0.0), stages=stages)


# --- debugging modes left on -------------------------------------------------------------------------------------


def _debug_modes(ctx: Context, readings: tuple[SettingReading, ...]) -> Iterator[Finding]:
    flags = sub(ctx.probe(ProbeName.SETTINGS), SettingsKeys.TORCH_FLAGS)
    stderr = (ctx.obs.process.stderr_tail or "") if ctx.obs.process is not None else ""
    calls = {r.name: r for r in readings if r.source == "call"}
    anomaly_call = calls.get("torch.autograd.set_detect_anomaly")
    modes: list[tuple[str, str, str, bool]] = []  # (what, how it was seen, remedy, on now: a measured state)
    if flags.get(SettingsKeys.ANOMALY_DETECTION) is True or (anomaly_call is not None and "True" in anomaly_call.value
                                                                and flags.get(SettingsKeys.ANOMALY_DETECTION) is not False):
        how = f"torch.autograd.set_detect_anomaly({anomaly_call.value}) {anomaly_call.detail}" if anomaly_call \
            else "torch.is_anomaly_enabled() is True"
        modes.append(("anomaly detection is on", how, "torch.autograd.set_detect_anomaly(False), or use "
                      "torch.autograd.detect_anomaly() only around the step you debug", True))
    elif not flags and (captured := _native_stack_capture_share(ctx))[0] >= ANOMALY_STACKS_SHARE:
        # From outside: the samples show what anomaly mode does, a Python stack stored for every op from C++.
        share, who = captured
        modes.append(("anomaly detection looks on",
                      f"{pct(share)} of the samples of {', '.join(who[:3])} are in traceback.format_stack called from "
                      "inside ops, not from a Python line: what anomaly mode does for every op it records (the "
                      "settings probe reads the flag itself: `dflash-diag doctor PID --attach`)",
                      "torch.autograd.set_detect_anomaly(False), or use torch.autograd.detect_anomaly() only around "
                      "the step you debug", True))
    elif _ANOMALY_WARNING in stderr and not flags:
        # torch warns when detect_anomaly() is entered: it was on at some point, perhaps around one step only.
        modes.append(("anomaly detection was turned on at some point",
                      "torch warned \"Anomaly Detection has been enabled\" (stderr); whether it still is, the settings "
                      "probe tells (`dflash-diag doctor PID --attach`)",
                      "use torch.autograd.detect_anomaly() only around the step you debug", False))
    if flags.get(SettingsKeys.AUTOGRAD_PROFILER) is True:
        modes.append(("the autograd profiler records every op", "torch.autograd.profiler is enabled",
                      "stop the profiler (exit its context, or profile a few steps with a schedule)", True))
    sync_mode = flags.get(SettingsKeys.CUDA_SYNC_DEBUG_MODE)
    ours = sync_mode == SYNCS_PROBE_SYNC_MODE and sync_mode_is_ours(ctx.obs.board)  # the syncs probe counting syncs
    if isinstance(sync_mode, int) and not isinstance(sync_mode, bool) and sync_mode > 0 and not ours:
        modes.append(("the CUDA sync debug mode checks every synchronizing call",
                      f"torch.cuda.get_sync_debug_mode() is {sync_mode}", "torch.cuda.set_sync_debug_mode(0)", True))
    for mode, how, fix, now in modes:
        share, threads = _ops_share(ctx)
        if not threads:
            continue
        severity = Severity.WARNING if now and share >= DEBUG_OPS_SHARE else Severity.INFO
        who = ", ".join(threads[:3])
        verb = "spends" if len(threads) == 1 else "spend"
        slows = "it slows every autograd op" if now else "while on, it slows every autograd op"
        yield Finding(
            rule_id="torch-debug-mode", severity=severity,
            claim=f"{mode} ({how}): {slows}, and {who} {verb} {pct(share)} of {'its' if len(threads) == 1 else 'their'} "
                  "samples in ops",
            evidence=(("mode", how), ("time in the ops it slows", f"{pct(share)} of the samples of "
                                                                  f"{', '.join(threads[:4])}")),
            remedy=f"Turn it off for training: {fix}.", impact=share if severity >= Severity.WARNING else 0.0)
    blocking = next((r for r in readings if r.name == "CUDA_LAUNCH_BLOCKING" and r.value not in ("0", "")), None)
    if blocking is not None and ctx.on_cuda():
        share, threads = _state_share(ctx, ThreadState.GPU_WAIT)
        if threads and share >= LAUNCH_BLOCKING_WAIT_SHARE:
            yield Finding(
                rule_id="torch-debug-mode", severity=Severity.WARNING,
                claim=f"CUDA_LAUNCH_BLOCKING={blocking.value} ({blocking.source}) makes every kernel launch wait for "
                      f"the kernel: {', '.join(threads[:3])} wait on the GPU {pct(share)} of their samples",
                evidence=(("CUDA_LAUNCH_BLOCKING", f"{blocking.value} ({blocking.source})"),
                          ("GPU waits", f"{pct(share)} of the samples of {', '.join(threads[:4])}")),
                remedy="Unset CUDA_LAUNCH_BLOCKING for training (it is for locating a failing kernel).", impact=share)


# --- a native library logging every call ------------------------------------------------------------------------

# Variables that make a native library write a line for every call it serves: (what it logs, the values that do;
# empty: any value away from the default). The cost lands in the ops of the threads that call it (a timer read, a
# format and a write per call) and in whatever reads the output (a terminal, a pipe into a Python thread).
_PER_CALL_LOGS: dict[str, tuple[str, tuple[str, ...]]] = {
    "MKL_VERBOSE": ("MKL times every BLAS and LAPACK call and writes a line for it", ()),
    "ONEDNN_VERBOSE": ("oneDNN writes a line for every primitive it creates or runs", ()),
    "DNNL_VERBOSE": ("oneDNN writes a line for every primitive it creates or runs", ()),
    "CUDNN_LOGINFO_DBG": ("cuDNN logs every API call", ()),
    "CUBLAS_LOGINFO_DBG": ("cuBLAS logs every API call", ()),
    "CUBLASLT_LOG_LEVEL": ("cuBLASLt logs its API calls", ()),
    "NCCL_DEBUG": ("NCCL writes lines per communicator operation", ("INFO", "TRACE")),
    "TORCH_CPP_LOG_LEVEL": ("torch's C++ code logs at INFO", ("INFO", "0")),
}
# The log measurably runs: the process made this many write calls a second, or wrote this many bytes a second, over
# the window (a trainer without it writes a progress line now and then: a few a second).
LOG_WRITES_PER_S = 200.0
LOG_BYTES_PER_S = 64 * 1024


def _native_call_logs(ctx: Context, readings: tuple[SettingReading, ...]) -> Iterator[Finding]:
    logs = [(r, _PER_CALL_LOGS[r.name][0]) for r in readings if r.name in _PER_CALL_LOGS
            and (not _PER_CALL_LOGS[r.name][1] or r.value.upper() in _PER_CALL_LOGS[r.name][1])]
    rate = write_rate(ctx.obs)
    if not logs or rate is None:
        return  # listed by settings-changed; without the write counters nothing says the log runs
    writes_per_s, bytes_per_s = rate
    if writes_per_s < LOG_WRITES_PER_S and bytes_per_s < LOG_BYTES_PER_S:
        return
    share, threads = _ops_share(ctx)
    if not threads:
        return
    reading, what = logs[0]
    severity = Severity.WARNING if share >= DEBUG_OPS_SHARE else Severity.INFO
    who = ", ".join(threads[:3])
    many = len(threads) != 1
    names = ", ".join(r.text() for r, _ in logs)
    yield Finding(
        rule_id="native-call-log", severity=severity,
        claim=f"{reading.text()} ({reading.source}): {what}; the process made {writes_per_s:,.0f} write calls a "
              f"second ({bytes_rate(bytes_per_s)}) over the window, and {who} {'spend' if many else 'spends'} "
              f"{pct(share)} of {'their' if many else 'its'} samples in the ops it logs",
        evidence=(("variables", names), ("writes (/proc/PID/io)", f"{writes_per_s:,.0f} calls/s, "
                                                                 f"{bytes_rate(bytes_per_s)}"),
                  ("time in ops", f"{pct(share)} of the samples of {', '.join(threads[:4])}")),
        remedy=f"Unset {', '.join(r.name for r, _ in logs)} for training (a per-call log is for debugging a few "
               "calls), or set it to its default.",
        impact=share if severity >= Severity.WARNING else 0.0)


# --- glibc's allocator debugging every block ---------------------------------------------------------------------


def _malloc_debug_modes(ctx: Context, readings: tuple[SettingReading, ...]) -> list[tuple[SettingReading, str]]:
    """The readings that make glibc's malloc debug every call, with what each does. MALLOC_CHECK_ counts only where
    its library is loaded (glibc 2.34 moved the checks into libc_malloc_debug.so: without it the variable does
    nothing)."""
    facts = ctx.obs.os_facts
    debug_lib = facts is not None and "libc_malloc_debug" in facts.libraries
    out = []
    for r in readings:
        value = r.value.strip()
        if r.name == "MALLOC_PERTURB_" and value not in ("", "0"):
            out.append((r, "glibc fills every block it hands out and every block freed with a byte pattern (a "
                           "memset per malloc and free)"))
        elif r.name == "MALLOC_CHECK_" and debug_lib:
            out.append((r, "glibc checks the heap's consistency on every malloc and free (libc_malloc_debug.so is "
                           "loaded)"))
        elif r.name == "GLIBC_TUNABLES" and re.search(r"glibc\.malloc\.(perturb|check)=[1-9]", value):
            out.append((r, "glibc's malloc tunables fill or check every block"))
    return out


# A reading's source that says the setting is in the environment of the process's children, not its own.
CHILDREN_SOURCE = "of its children"
# The C library's allocator calls (and the fill a perturbed block gets) in a child's native samples.
_MALLOC_CALLS = frozenset({"malloc", "free", "calloc", "realloc", "cfree", "_int_malloc", "_int_free", "__libc_malloc",
                           "__libc_free", "__libc_calloc", "__libc_realloc", "sbrk", "brk", "__default_morecore",
                           "memset"})


def _malloc_debug(ctx: Context, readings: tuple[SettingReading, ...]) -> Iterator[Finding]:
    modes = _malloc_debug_modes(ctx, readings)
    own = [(r, w) for r, w in modes if CHILDREN_SOURCE not in r.source]
    children = [(r, w) for r, w in modes if CHILDREN_SOURCE in r.source]
    if children:
        yield from _children_malloc_debug(ctx, children)
    if own:
        yield from _own_malloc_debug(ctx, own)


def _is_malloc_call(name: str) -> bool:
    return name in _MALLOC_CALLS or name.startswith(("__memset", "__GI_memset", "_int_malloc", "_int_free"))


def _children_malloc_debug(ctx: Context, modes: list[tuple[SettingReading, str]]) -> Iterator[Finding]:
    """The setting is in the children's environment only: the process's own ops allocate without it. Weighed by
    the share of a child's native samples (doctor's look at a process a thread waits on) in the allocator's calls;
    nothing is said of a child no look reached (the settings' list names the variable)."""
    best: tuple[float, int] | None = None
    for look in ctx.obs.peer_native:
        total = sum(s.count for s in look.profile.stacks)
        hits = sum(s.count for s in look.profile.stacks if any(f.native and _is_malloc_call(f.name) for f in s.frames))
        if total and (best is None or hits / total > best[0]):
            best = (hits / total, look.pid)
    if best is None or best[0] < KERNELS_NOTE_SHARE:
        return
    share, pid = best
    waiting = {w.tid for w in ctx.obs.outside_waits if any(p.pid == pid for p in w.peers)}
    stages = tuple(sorted({t.stage for t in ctx.threads if t.os_thread_id in waiting and t.stage in PIPELINE_STAGES}))
    reading, what = modes[0]
    severity = Severity.WARNING if share >= DEBUG_OPS_SHARE else Severity.INFO
    yield Finding(
        rule_id="malloc-debug", severity=severity,
        claim=f"{reading.text()} ({reading.source}): {what}; process {pid}, a child the process waits on, spends "
              f"{pct(share)} of its native samples in the allocator's calls (malloc, free, the fill)",
        evidence=tuple((r.text(), f"{r.source}; {w}") for r, w in modes)
        + (("time in the allocator", f"{pct(share)} of process {pid}'s native samples"),),
        remedy=f"Leave {', '.join(r.name for r, _ in modes)} out of the children's environment for training (they "
               "are for finding heap corruption).",
        impact=share if severity >= Severity.WARNING else 0.0, stages=stages)


def _own_malloc_debug(ctx: Context, modes: list[tuple[SettingReading, str]]) -> Iterator[Finding]:
    share, threads = _ops_share(ctx)
    if not threads or share < KERNELS_NOTE_SHARE:
        return
    reading, what = modes[0]
    severity = Severity.WARNING if share >= DEBUG_OPS_SHARE else Severity.INFO
    many = len(threads) != 1
    yield Finding(
        rule_id="malloc-debug", severity=severity,
        claim=f"{reading.text()} ({reading.source}): {what}; {', '.join(threads[:3])} "
              f"{'spend' if many else 'spends'} {pct(share)} of {'their' if many else 'its'} samples in ops, whose "
              "tensors are allocated and freed through it",
        evidence=tuple((r.text(), f"{r.source}; {w}") for r, w in modes)
        + (("time in ops", f"{pct(share)} of the samples of {', '.join(threads[:4])}"),),
        remedy=f"Unset {', '.join(r.name for r, _ in modes)} for training (they are for finding heap corruption).",
        impact=share if severity >= Severity.WARNING else 0.0)


# --- a float64 default dtype ----------------------------------------------------------------------------------------

FLOAT64_NAMES = frozenset({"torch.float64", "torch.double"})


def _default_dtype(ctx: Context, readings: tuple[SettingReading, ...]) -> Iterator[Finding]:
    """torch.get_default_dtype() is float64 (a library's import often sets it): every floating tensor, parameter
    and buffer created without a dtype is double precision, so the ops on them take the float64 kernels (about
    twice a float32 op's time on a CPU, a small fraction of its throughput on a GPU). Weighed, as the debug modes
    are, by the training threads' share of samples in ops; the call that set it named where the probe saw it."""
    flags = sub(ctx.probe(ProbeName.SETTINGS), SettingsKeys.TORCH_FLAGS)
    if flags.get(SettingsKeys.DEFAULT_DTYPE) not in FLOAT64_NAMES:
        return
    share, threads = _ops_share(ctx)
    if not threads:
        return
    call = next((r for r in readings if r.source == "call" and r.name == "torch.set_default_dtype"), None)
    how = f"torch.set_default_dtype({call.value}) {call.detail}" if call is not None else \
        "torch.get_default_dtype() is torch.float64"
    severity = Severity.WARNING if share >= DEBUG_OPS_SHARE else Severity.INFO
    who = ", ".join(threads[:3])
    yield Finding(
        rule_id="default-dtype-float64", severity=severity,
        claim=f"the default dtype is float64 ({how}): tensors and parameters created without a dtype are double "
              f"precision, and {who} spend{'s' if len(threads) == 1 else ''} {pct(share)} of "
              f"{'its' if len(threads) == 1 else 'their'} samples in ops on them (float64 kernels: about twice "
              "float32's time on a CPU, far more on a GPU)",
        evidence=(("default dtype", how), ("time in ops", f"{pct(share)} of the samples of {', '.join(threads[:4])}")),
        remedy="Set it back after the import that changed it (torch.set_default_dtype(torch.float32)), and give "
               "the tensors that need double precision an explicit dtype=torch.float64.",
        impact=share if severity >= Severity.WARNING else 0.0)


def _working(ctx: Context) -> list[Any]:
    """The program's threads that compute in half their samples or more (the tool's own left out)."""
    return [t for t in ctx.sampled() if sum(t.shares.get(s, 0.0) for s in _WORK) >= 0.5
            and not t.name.startswith("dflash-diag-")]


def _training(ctx: Context) -> list[Any]:
    trains = set(ctx.waits.trains)
    return [t for t in ctx.sampled() if t.name in trains] or _working(ctx)


def _ops_share(ctx: Context) -> tuple[float, list[str]]:
    """Share of the training threads' samples inside torch ops: native code, or a torch frame doing work."""
    threads = _training(ctx)
    return ops_share_of(ctx, threads), [t.name for t in threads]


def ops_share_of(ctx: Context, threads: list[Any]) -> float:
    """Share of these threads' samples inside torch ops: native code, or a torch frame doing work."""
    rows = [row for t in threads for row in ctx.stats_rows(t)]
    if not rows:
        return 0.0
    in_ops = sum(1 for thread, state in rows if state in _WORK and (
        state is ThreadState.NATIVE or any(not f.native and any(m in f.filename for m in _TORCH_OP_FILES)
                                           for f in thread.frames)))
    return in_ops / len(rows)


def _native_stack_capture_share(ctx: Context) -> tuple[float, list[str]]:
    """Share of the training threads' samples inside a Python stack capture that native code called."""
    threads = _training(ctx)
    rows = [thread for t in threads for thread, _ in ctx.stats_rows(t)]
    if not rows:
        return 0.0, []
    return sum(1 for thread in rows if stack_capture_from_native(ctx, thread)) / len(rows), [t.name for t in threads]


def _state_share(ctx: Context, state: ThreadState) -> tuple[float, list[str]]:
    threads = _training(ctx)
    if not threads:
        return 0.0, []
    return sum(t.shares.get(state, 0.0) for t in threads) / len(threads), [t.name for t in threads]


# --- the interpreter calls a hook on every event ---------------------------------------------------------------------

# A hook's cost lands where the interpreter runs Python code (each line, call and allocation there calls it): a cost
# when a thread that matters spends this share of its samples running Python.
HOOK_PYTHON_SHARE = 0.30
_OFF = ("", "0")


class _Hook:
    """An interpreter hook that is on: what it does, how it was seen, the threads it runs in (empty: every thread)."""

    def __init__(self, what: str, how: str, fix: str, threads: tuple[str, ...] = ()) -> None:
        self.what, self.how, self.fix, self.threads = what, how, fix, threads


def _hooks(ctx: Context, readings: tuple[SettingReading, ...]) -> list[_Hook]:
    probed = bool(sub(ctx.probe(ProbeName.SETTINGS), SettingsKeys.INTERPRETER))
    out: list[_Hook] = []
    by_name = {r.name: r for r in readings}
    tracing = by_name.get("tracemalloc")
    env = by_name.get("PYTHONTRACEMALLOC")
    xopt = by_name.get("-X options")
    if tracing is not None:
        out.append(_Hook(f"tracemalloc traces every allocation ({tracing.value})", "tracemalloc.is_tracing()",
                         "tracemalloc.stop() once the snapshot you need is taken (or trace a few steps only)"))
    elif not probed and ((env is not None and env.value not in _OFF) or (xopt is not None and "tracemalloc" in xopt.value)):
        how = f"PYTHONTRACEMALLOC={env.value} ({env.source})" if env is not None and env.value not in _OFF \
            else f"{xopt.value if xopt is not None else '-X tracemalloc'}"
        out.append(_Hook("tracemalloc traces every allocation from the start", how,
                         "unset PYTHONTRACEMALLOC / drop -X tracemalloc for training runs"))
    for r in readings:
        if r.name.startswith("trace function of thread "):
            out.append(_Hook(f"a trace function ({r.value}) runs on every line and call of "
                             f"{r.name.removeprefix('trace function of thread ')}", "a frame's f_trace (settings probe)",
                             "remove the sys.settrace call (a debugger, coverage or a tracing helper left on)",
                             (r.name.removeprefix("trace function of thread "),)))
        elif r.name in ("a trace function for new threads", "a profile function for new threads"):
            kind = "trace" if "trace" in r.name else "profile"
            out.append(_Hook(f"a {kind} function ({r.value}) runs in every thread started since",
                             f"threading.set{kind}", f"remove the threading.set{kind}/sys.set{kind} call"))
        elif r.name == "sys.monitoring tools":
            out.append(_Hook(f"sys.monitoring tools ({r.value}) get code events", "sys.monitoring.get_tool",
                             "unregister the tool (coverage, a debugger) for training runs"))
    dev = by_name.get("sys.flags.dev_mode") or (by_name.get("PYTHONDEVMODE") if not probed else None)
    if dev is not None and dev.value not in _OFF and dev.value != "False":
        out.append(_Hook("the development mode checks every allocation (debug allocator hooks)", dev.text(),
                         "run training without -X dev / PYTHONDEVMODE"))
    malloc = by_name.get("PYTHONMALLOC")
    if malloc is not None and malloc.value in DEBUG_ALLOCATORS and (dev is None or dev.value in _OFF):
        out.append(_Hook(f"the interpreter's debug allocator checks every allocation ({malloc.text()})",
                         f"{malloc.text()} ({malloc.source})", "unset PYTHONMALLOC for training runs"))
    return out


def _interpreter_hooks(ctx: Context, readings: tuple[SettingReading, ...]) -> Iterator[Finding]:
    hooks = _hooks(ctx, readings)
    if not hooks:
        return
    working = _working(ctx)
    for hook in hooks:
        threads = [t for t in working if not hook.threads or t.name in hook.threads]
        exposed = sorted(((t, t.shares.get(ThreadState.PYTHON, 0.0)) for t in threads), key=lambda p: -p[1])
        exposed = [(t, share) for t, share in exposed if share >= HOOK_PYTHON_SHARE]
        if not exposed:
            continue
        costly = [(t, share) for t, share in exposed if speed_matters(ctx, t.name, t.stage.value)]
        lead = costly or exposed
        who = ", ".join(f"{t.name} {pct(share)}" for t, share in lead[:3])
        severity = Severity.WARNING if costly else Severity.INFO
        yield Finding(
            rule_id="interpreter-hook", severity=severity,
            claim=f"{hook.what}: it slows every Python line, call and allocation, and the threads it runs in spend "
                  f"that share of their samples running Python: {who}",
            evidence=(("hook", hook.how), *((f"{t.name}: running Python", f"{pct(share)} of its samples")
                                            for t, share in lead[:4])),
            remedy=f"Turn it off for training: {hook.fix}.",
            impact=lead[0][1] if costly else 0.0,
            stages=tuple(sorted({t.stage.value for t, _ in lead} - {"other"})))


# --- a CPU kernel library turned off or held to a slower code path ----------------------------------------------------

# Values that keep the library on its fastest path for this CPU (the rest pin a fixed or capped one).
_FAST_PATH_VALUES = {"MKL_CBWR": ("", "AUTO"), "ONEDNN_MAX_CPU_ISA": ("", "ALL", "DEFAULT"),
                     "DNNL_MAX_CPU_ISA": ("", "ALL", "DEFAULT"), "ATEN_CPU_CAPABILITY": ("", "AVX2", "AVX512"),
                     "MKL_DEBUG_CPU_TYPE": ("",),
                     "MKL_ENABLE_INSTRUCTIONS": ("", "AVX2", "AVX512", "AVX512_E1", "AVX512_E2", "AVX512_E3",
                                                 "AVX512_E4", "AVX512_E5")}
# oneDNN's primitive cache (0 turns it off: a primitive is created, its kernel chosen and JIT-compiled, on every call).
_PRIMITIVE_CACHES = frozenset({"ONEDNN_PRIMITIVE_CACHE_CAPACITY", "DNNL_PRIMITIVE_CACHE_CAPACITY"})
# scaled_dot_product_attention's fused backends, turned off process-wide: what runs instead.
_SDPA_FLAGS = {
    "torch.backends.cuda.flash_sdp_enabled()": "the flash attention kernel is off, so scaled_dot_product_attention "
                                               "runs an unfused path (the math one on the CPU: the T x T scores "
                                               "materialised, softmax and two matmuls)",
    "torch.backends.cuda.mem_efficient_sdp_enabled()": "the memory-efficient attention kernel is off: "
                                                       "scaled_dot_product_attention falls back to another backend",
}
# ... of which the CPU has: the memory-efficient kernel is CUDA's only (turning it off changes nothing on a CPU).
_SDPA_ON_CPU = frozenset({"torch.backends.cuda.flash_sdp_enabled()"})
# Below this share of the training threads' samples in the ops a kernel setting slows, it is only listed.
KERNELS_NOTE_SHARE = 0.10
_CONV_FRAMES = ("torch/nn/modules/conv.py",)
_BACKWARD_FUNCTIONS = frozenset({"_engine_run_backward", "backward"})
_CONV_FUNCTIONS = frozenset({"conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                             "conv_transpose3d", "_conv_forward"})
_ATTENTION_FUNCTIONS = frozenset({"scaled_dot_product_attention", "multi_head_attention_forward",
                                  "MultiheadAttention.forward"})


def _conv_share(ctx: Context) -> tuple[float, float, list[str]]:
    """(share of the training threads' samples in convolutions' forward, the same estimated with their backward,
    the threads)."""
    return _op_share(ctx, lambda python: any(f.filename.endswith(_CONV_FRAMES) or f.name in _CONV_FUNCTIONS
                                             for f in python))


def _einsum_share(ctx: Context) -> tuple[float, float, list[str]]:
    """The same for einsum: torch.functional.einsum's frame, or a line of the program that calls it."""
    def is_einsum(python: list[Frame]) -> bool:
        if any(f.name == "einsum" for f in python):
            return True
        own = next((f for f in python if not is_library_file(f.filename)), None)
        return own is not None and "einsum(" in (ctx.line_text(own) or "")
    return _op_share(ctx, is_einsum)


def _attention_share(ctx: Context) -> tuple[float, float, list[str]]:
    """The same for scaled-dot-product attention: torch's attention modules, or a line of the program that calls
    ``scaled_dot_product_attention`` (a C function: no frame of its own)."""
    def is_attention(python: list[Frame]) -> bool:
        if any(f.name in _ATTENTION_FUNCTIONS for f in python):
            return True
        own = next((f for f in python if not is_library_file(f.filename)), None)
        return own is not None and "scaled_dot_product_attention" in (ctx.line_text(own) or "")
    return _op_share(ctx, is_attention)


def _op_share(ctx: Context, is_op: Callable[[list[Frame]], bool]) -> tuple[float, float, list[str]]:
    """(share of the training threads' samples in an op's forward, the same estimated with its backward, the
    threads). Backward runs in autograd's engine, where no frame names the op: its samples are counted in the
    proportion the op holds among the forward ops' samples (its gradient costs about what it does)."""
    threads = _training(ctx)
    rows = [row for t in threads for row in ctx.stats_rows(t) if row[1] in _WORK]
    if not rows:
        return 0.0, 0.0, []
    hits = backward = forward_ops = 0
    for thread, _ in rows:
        python = [f for f in thread.frames if not f.native]
        if is_op(python):
            hits += 1
            forward_ops += 1
        elif any(f.name in _BACKWARD_FUNCTIONS for f in python):
            backward += 1
        elif any("torch/nn/" in f.filename for f in python):
            forward_ops += 1
    total = len(rows)
    forward = hits / total
    return forward, forward + (backward / total) * (hits / forward_ops if forward_ops else 0.0), \
        [t.name for t in threads]


_QUANTIZED_FILES = ("/ao/nn/quantized/", "/nn/quantized/", "/ao/nn/intrinsic/quantized/")


def _quantized_share(ctx: Context) -> tuple[float, list[str]]:
    """Share of the samples of the threads whose speed is the program's (they train, or their stage limits
    throughput: a labeller's int8 teacher too) inside torch's quantized modules."""
    threads = speed_threads(ctx)
    rows = [row for t in threads for row in ctx.stats_rows(t) if row[1] in _WORK]
    if not rows:
        return 0.0, []
    hits = sum(1 for thread, _ in rows if any(not f.native and any(q in f.filename for q in _QUANTIZED_FILES)
                                              for f in thread.frames))
    return hits / len(rows), [t.name for t in threads]


# The C code of decimal's arithmetic: the _decimal module and libmpdec, as their frames and files name them.
_DECIMAL_CODE = re.compile(r"_decimal|mpdecimal|libmpdec|basearith|^_?mpd_|^(nm|dec)_mpd_|^PyDec")


def _native_code_share(ctx: Context, code: re.Pattern[str]) -> tuple[float, list[str]]:
    """Share of the native samples (the native profile) of the threads whose speed is the program's in C/C++ code
    matching ``code``: a setting that slows only code no Python frame shows is weighed by this. (0, []) without a
    native profile."""
    threads = speed_threads(ctx)
    tids = {t.os_thread_id for t in threads if t.os_thread_id is not None}
    share, samples = share_in(thread_stacks(ctx.obs.native, tids), code)
    if samples < NATIVE_MIN_SAMPLES:
        return 0.0, []
    return share, [t.name for t in threads]


def _kernel_paths(ctx: Context, readings: tuple[SettingReading, ...]) -> Iterator[Finding]:
    """oneDNN turned off (torch.backends.mkldnn.enabled = False: convolutions fall back to torch's slow_conv2d,
    im2col + gemm), or a math library held to a fixed or capped code path (MKL_CBWR, *_MAX_CPU_ISA, ...): weighed by
    the training threads' share of samples in the ops it slows (convolutions; every op for the BLAS paths)."""
    for r in readings:
        if r.name == "torch.backends.mkldnn.enabled" and r.value == "False":
            forward, share, threads = _conv_share(ctx)
            what = ("oneDNN is off (torch.backends.mkldnn.enabled = False): convolutions run torch's own "
                    "slow_conv2d (im2col + gemm) instead of oneDNN's kernels")
            ops = f"convolutions, forward ({pct(forward)}) and their share of backward"
            fix = ("set torch.backends.mkldnn.enabled = True; a numerics check that needs it off can use `with "
                   "torch.backends.mkldnn.flags(enabled=False):` around the check only")
        elif r.name in _PRIMITIVE_CACHES and r.value.strip() == "0":
            forward, share, threads = _conv_share(ctx)
            what = (f"{r.text()} ({r.source}) turns oneDNN's primitive cache off: every convolution call, forward "
                    "and both backward passes, chooses and JIT-compiles its kernel again")
            ops = f"convolutions, forward ({pct(forward)}) and their share of backward"
            fix = (f"unset {r.name} (default 1024), or keep a capacity above the number of distinct convolution "
                   "shapes (bucket variable lengths) where memory growth was the reason")
        elif r.name in _SDPA_FLAGS and r.value == "False" and (r.name in _SDPA_ON_CPU or ctx.on_cuda()):
            forward, share, threads = _attention_share(ctx)
            what = f"{r.text()}: {_SDPA_FLAGS[r.name]} (a process-wide flag" + (
                ", which CPU attention honours too)" if r.name in _SDPA_ON_CPU else ")")
            ops = f"attention, forward ({pct(forward)}) and its share of backward"
            fix = (f"set it back ({r.name.replace('_enabled()', '').replace('torch.backends.cuda.', 'torch.backends.cuda.enable_')}"
                   "(True)); a numerics comparison can pin a backend around itself only with "
                   "`torch.nn.attention.sdpa_kernel(...)`")
        elif r.name == "torch.backends.quantized.engine":
            share, threads = _quantized_share(ctx)
            what = (f"torch.backends.quantized.engine = {r.value} (this machine's own is {r.default}): quantized "
                    f"(int8) ops run {r.value}'s kernels, made for another kind of CPU")
            ops = "quantized modules"
            fix = f"set torch.backends.quantized.engine = '{r.default}' here (keep {r.value} for the device it targets)"
        elif r.name == "torch.backends.opt_einsum.enabled" and r.value == "False":
            forward, share, threads = _einsum_share(ctx)
            what = ("einsum's contraction order is left to right (torch.backends.opt_einsum.enabled = False): with "
                    "three or more operands the intermediate tensors can be far larger than the best order's")
            ops = f"einsum, forward ({pct(forward)}) and its share of backward"
            fix = "set torch.backends.opt_einsum.enabled = True (or order the operands by hand)"
        elif r.name == "decimal.DefaultContext.prec" and r.value.isdigit() and int(r.value) > int(r.default):
            share, threads = _native_code_share(ctx, _DECIMAL_CODE)
            what = (f"decimal's default context precision is {r.value} digits (Python's is {r.default}): every thread's "
                    "context is copied from it, so each Decimal operation there works on coefficients that long")
            ops = "decimal arithmetic (libmpdec, read from native stacks)"
            fix = (f"keep decimal.DefaultContext.prec at {r.default} and raise the precision only around the "
                   "computation that needs it (`with decimal.localcontext(prec=...)`), then quantize")
        elif r.name in _FAST_PATH_VALUES and r.value.strip().upper().split(",")[0] not in _FAST_PATH_VALUES[r.name]:
            share, threads = _ops_share(ctx)
            what = f"{r.text()} ({r.source}) holds the CPU math kernels to a fixed or capped code path: {r.effect}"
            ops = "torch ops"
            fix = f"unset {r.name} (or set it to the CPU's own path) for training runs"
        else:
            continue
        if not threads or share < KERNELS_NOTE_SHARE:
            continue
        severity = Severity.WARNING if share >= DEBUG_OPS_SHARE else Severity.INFO
        who = ", ".join(threads[:3])
        yield Finding(
            rule_id="cpu-kernels-slowed", severity=severity,
            claim=f"{what}; {who} spend{'s' if len(threads) == 1 else ''} about {pct(share)} of "
                  f"{'its' if len(threads) == 1 else 'their'} samples in {ops}",
            evidence=((r.text(), f"{r.source}; default {r.default}"),
                      ("time in the ops it slows", f"{pct(share)} of the samples of {', '.join(threads[:4])}")),
            remedy=f"Turn it back for training: {fix}.",
            impact=share if severity >= Severity.WARNING else 0.0)
