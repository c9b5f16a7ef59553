"""Which process-wide settings differ from their defaults, from outside (the environment the process and its
children were started with, ``Observation.os_facts``) and from the ``settings`` probe (the interpreter, torch's
modes and flags, the environment as the program changed it, and the calls that changed a setting). Pure.

Every reading names what it can slow (its *area*, ``dflash_contract.settings``): the rules make a setting the
cause of a slowdown only where they measure a cost in that area; the rest is shown as information.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dflash_contract.board import PayloadKeys, ProbeName, SettingsKeys
from dflash_contract.settings import (
    AREA_AUTOGRAD,
    AREA_COLLECTOR,
    AREA_DEBUG,
    AREA_GIL,
    AREA_KERNEL,
    AREA_LAUNCHES,
    AREA_LIBRARY,
    AREA_MEMORY,
    AREA_NUMERICS,
    AREA_THREADS,
    DEFAULT_DECIMAL_PREC,
    DEFAULT_RECURSION_LIMIT,
    DEFAULT_SWITCH_INTERVAL_S,
    ENV_BY_NAME,
)
from dflash_diag.analysis.sched import memory_limit_binds
from dflash_diag.model import Board, Observation
from dflash_diag.model.sched import POLICY_NAMES, SettingReading

# torch's flags with their defaults and what they change: (key, shown name, default, area, effect).
_TORCH_FLAGS: tuple[tuple[str, str, Any, str, str], ...] = (
    (SettingsKeys.DETERMINISTIC_ALGORITHMS, "torch.are_deterministic_algorithms_enabled()", False, AREA_NUMERICS,
     "deterministic kernels only: slower ones where a fast kernel is not deterministic"),
    (SettingsKeys.ANOMALY_DETECTION, "torch.is_anomaly_enabled()", False, AREA_AUTOGRAD,
     "every autograd op records a stack trace, and backward checks every output for NaN (typically 2-10x slower)"),
    (SettingsKeys.AUTOGRAD_PROFILER, "torch.autograd.profiler enabled", False, AREA_AUTOGRAD,
     "every op is recorded by the profiler"),
    (SettingsKeys.FLOAT32_MATMUL_PRECISION, "torch.get_float32_matmul_precision()", "highest", AREA_NUMERICS,
     "float32 matmuls may use TF32 or bf16"),
    (SettingsKeys.CUDA_MATMUL_ALLOW_TF32, "torch.backends.cuda.matmul.allow_tf32", False, AREA_NUMERICS,
     "float32 CUDA matmuls in TF32"),
    (SettingsKeys.CUDNN_ALLOW_TF32, "torch.backends.cudnn.allow_tf32", True, AREA_NUMERICS,
     "cuDNN convolutions in TF32 (off: full float32, slower)"),
    (SettingsKeys.CUDNN_BENCHMARK, "torch.backends.cudnn.benchmark", False, AREA_LAUNCHES,
     "benchmarks convolution algorithms for every new input shape"),
    (SettingsKeys.CUDNN_DETERMINISTIC, "torch.backends.cudnn.deterministic", False, AREA_NUMERICS,
     "deterministic convolutions only"),
    (SettingsKeys.CUDNN_ENABLED, "torch.backends.cudnn.enabled", True, AREA_LAUNCHES,
     "cuDNN kernels (off: torch's own, slower)"),
    (SettingsKeys.MKLDNN_ENABLED, "torch.backends.mkldnn.enabled", True, AREA_THREADS,
     "oneDNN CPU kernels (off: slower CPU convolutions and matmuls)"),
    (SettingsKeys.OPT_EINSUM_ENABLED, "torch.backends.opt_einsum.enabled", True, AREA_NUMERICS,
     "einsum's contraction order chosen by opt_einsum (off: left to right, which can be orders of magnitude more "
     "work for three or more operands)"),
    (SettingsKeys.FLASH_SDP_ENABLED, "torch.backends.cuda.flash_sdp_enabled()", True, AREA_NUMERICS,
     "scaled_dot_product_attention's flash kernel (off: an unfused path, on the CPU too)"),
    (SettingsKeys.MEM_EFFICIENT_SDP_ENABLED, "torch.backends.cuda.mem_efficient_sdp_enabled()", True, AREA_NUMERICS,
     "scaled_dot_product_attention's memory-efficient kernel"),
    (SettingsKeys.CUDA_SYNC_DEBUG_MODE, "torch.cuda.get_sync_debug_mode()", 0, AREA_LAUNCHES,
     "warns (1) or errors (2) at every synchronizing CUDA call"),
    (SettingsKeys.DEFAULT_DTYPE, "torch.get_default_dtype()", "torch.float32", AREA_NUMERICS,
     "the dtype of new floating-point tensors"),
)
# The calls the probe wraps, with what they change.
_CALL_EFFECTS: dict[str, tuple[str, str]] = {
    "torch.set_num_threads": (AREA_THREADS, "threads of each intra-op parallel region, for the calling thread"),
    "torch.set_num_interop_threads": (AREA_THREADS, "threads of the inter-op pool"),
    "torch.use_deterministic_algorithms": (AREA_NUMERICS, "deterministic kernels only"),
    "torch.set_float32_matmul_precision": (AREA_NUMERICS, "TF32/bf16 in float32 matmuls"),
    "torch.set_default_dtype": (AREA_NUMERICS, "the dtype of new floating-point tensors"),
    "torch.autograd.set_detect_anomaly": (AREA_AUTOGRAD, "anomaly detection: a stack trace per autograd op"),
    "gc.collect": (AREA_COLLECTOR, "a full collection now: every thread stops while it runs"),
    "gc.set_threshold": (AREA_COLLECTOR, "how many allocations start a collection"),
    "gc.disable": (AREA_COLLECTOR, "the collector stops running on its own"),
    "gc.enable": (AREA_COLLECTOR, "the collector runs on its own again"),
    "gc.freeze": (AREA_COLLECTOR, "moves every live object out of the collector's reach"),
    "gc.unfreeze": (AREA_COLLECTOR, "gives frozen objects back to the collector"),
    "sys.setswitchinterval": (AREA_GIL, "how long a thread may hold the GIL while another wants it"),
}
# Calls that restore a default or only read: not a change worth listing by themselves.
_HARMLESS_CALLS = frozenset({"gc.enable", "gc.unfreeze"})


def settings_payload(board: Board | None) -> Mapping[str, Any]:
    payload = board.probe(ProbeName.SETTINGS) if board is not None else None
    return payload if isinstance(payload, Mapping) else {}


def _sub(mapping: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = mapping.get(key)
    return value if isinstance(value, Mapping) else {}


def non_default(obs: Observation) -> tuple[SettingReading, ...]:
    """Every setting of the process seen away from its default, environment first."""
    out: list[SettingReading] = list(_environment(obs))
    out.extend(_priorities(obs))
    out.extend(_controls(obs))
    payload = settings_payload(obs.board)
    if payload:
        out.extend(_probe_environment(payload, {r.name for r in out}))
        out.extend(_interpreter(payload))
        out.extend(_torch(payload, ours=sync_mode_is_ours(obs.board)))
        out.extend(calls(payload))
        out.extend(_library(payload))
    return tuple(out)


LIBRARY_SOURCE = "changed at run time"


def _library(payload: Mapping[str, Any]) -> list[SettingReading]:
    """Library constants whose live value differs from their source's (``probes.libsettings``): the library's own
    code paths read them (a load factor, a default version, a mode)."""
    rows = payload.get(SettingsKeys.LIBRARY_CHANGES)
    out: list[SettingReading] = []
    for row in rows if isinstance(rows, list) else []:
        if isinstance(row, list) and len(row) == 4 and all(isinstance(v, str) for v in row):
            where, name, now, then = (v[:120] for v in row)
            out.append(SettingReading(name=name, value=now, default=then, area=AREA_LIBRARY,
                                      effect="a constant the library's code reads, set by the program",
                                      source=LIBRARY_SOURCE, detail=where))
    return out[:16]


def library_changes(readings: tuple[SettingReading, ...]) -> tuple[SettingReading, ...]:
    """The readings of library constants changed at run time (``detail`` is the library file, as imported)."""
    return tuple(r for r in readings if r.source == LIBRARY_SOURCE)


# The mode the syncs probe sets to count the program's syncs (``torch.cuda.set_sync_debug_mode(1)``, "warn").
SYNCS_PROBE_SYNC_MODE = 1


def sync_mode_is_ours(board: Board | None) -> bool:
    """Whether the CUDA sync debug mode now on is the syncs probe's own: it arms only where the program left the mode
    at 0 and reports ``ok`` only while armed. Read as the program's, it was a false `torch-debug-mode` warning on every
    CUDA program attached with probes (the H200 casebook, 2026-12-05)."""
    payload = board.probe(ProbeName.SYNCS) if board is not None else None
    return isinstance(payload, Mapping) and payload.get(PayloadKeys.STATUS) == "ok"


def _environment(obs: Observation) -> list[SettingReading]:
    facts = obs.os_facts
    if facts is None or not isinstance(facts.env, tuple):
        return []
    out = []
    for env in facts.env:
        var = ENV_BY_NAME.get(env.name)
        if var is None or var.is_default(env.value):
            continue
        if env.where.startswith("command line"):  # an interpreter option that sets what the variable sets
            source = f"the interpreter's {env.where}"
        else:
            source = {"process": "environment", "program": "environment, set by the program"}.get(
                env.where, f"environment of its {env.where}")
        out.append(SettingReading(name=env.name, value=env.value, default=var.default, area=var.area,
                                  effect=var.effect, source=source))
    return out


# What each kernel control the process runs under changes: (area, effect, default).
_CONTROL_EFFECTS: dict[str, tuple[str, str, str]] = {
    "seccomp filters": (AREA_KERNEL, "every system call of every thread runs the filters first (filters that check "
                        "arguments cannot be cached by the kernel: microseconds a call)", "none"),
    "seccomp": (AREA_KERNEL, "only read, write, exit and sigreturn are allowed", "off"),
    "locked memory": (AREA_MEMORY, "pages locked in RAM (mlock, mlockall; with MCL_FUTURE every new mapping is "
                      "faulted in and locked when it is made: each large allocation pays for all its pages at once)",
                      "none"),
    "transparent huge pages": (AREA_MEMORY, "large buffers are mapped in 4 KiB pages only: more page faults and "
                               "TLB misses (prctl PR_SET_THP_DISABLE, inherited by children)", "the machine's mode"),
    "speculative store bypass": (AREA_KERNEL, "a mitigation forced for this process (prctl PR_SET_SPECULATION_CTRL): "
                                 "loads wait for earlier stores' addresses, slower memory-bound code", "the kernel's policy"),
    "indirect branch speculation": (AREA_KERNEL, "a mitigation forced for this process: indirect calls and jumps "
                                    "(virtual calls, dispatch tables) run slower", "the kernel's policy"),
    # sources.sched.CPU_TIME_LIMIT: /proc/PID/limits' RLIMIT_CPU, where finite
    "a CPU-time limit": (AREA_KERNEL, "the kernel sends it SIGXCPU once it has used that much CPU time, which ends "
                         "it unless handled, and kills it at the hard limit (RLIMIT_CPU: ulimit -t, setrlimit, a "
                         "sandbox's limit): a long-lived worker is killed and started again, each start paying its "
                         "start-up", "unlimited"),
    # sources.sched.PTRACE_TRACER: /proc status' TracerPid, a tracer not this tool's own
    # sources.sched.CPU_QUOTA: a cgroup's quota that binds a peer, in a group the process is not in
    "a CPU quota": (AREA_KERNEL, "the kernel runs its group's tasks only that much CPU time per period and then "
                    "stops them until the next (cpu.max, cpu.cfs_quota_us: a container's or a launcher's limit), "
                    "however many cores sit idle", "none"),
    # sources.sched.MEMORY_LIMIT: a cgroup's memory limit a peer is held at, in a group the process is not in
    "a memory limit": (AREA_KERNEL, "the kernel keeps its group's memory, the page cache of the files it reads "
                       "included, under that limit (memory.max, memory.limit_in_bytes: a container's or a "
                       "launcher's limit): at the limit it reclaims the group's own pages, and data read again is "
                       "read from storage again", "none"),
    # sources.sched.IO_LIMIT: a cgroup's block-I/O limit a peer runs at, in a group the process is not in
    "an I/O limit": (AREA_KERNEL, "the kernel lets its group read or write only that much a second on that disk "
                     "(io.max, blkio.throttle.*_device: a batch system's or a container's cap) and holds each call "
                     "until the budget allows it, however idle the disk", "none"),
    "a ptrace tracer": (AREA_KERNEL, "another process is attached with ptrace (a debugger, strace, an auditor): one "
                        "that traces system calls stops it at the entry and the exit of every call, each stop a "
                        "switch to the tracer and back", "none"),
}


# A watch one of the process's children holds (sources.sched.children_permission_watches), and what it does.
HELD_BY_CHILD = ", held by its child "
CHILD_PERMISSION_EFFECT = ("every matching open or read of a watched file, by any process, waits in the kernel until "
                           "that child has read the event and answered (a fanotify permission event)")


def control_effect(name: str) -> str:
    """What a kernel control (``parse_process_controls``' name) does to the code that runs under it; "" unknown."""
    return _CONTROL_EFFECTS.get(name, ("", "", ""))[1]


def _controls(obs: Observation) -> list[SettingReading]:
    """What the kernel was told to do for the process away from its defaults (/proc/PID/status, read once), and its
    memory cgroup's limit where it binds (read each sweep)."""
    facts = obs.os_facts
    controls, watches = (facts.controls, facts.watches) if facts is not None else ((), ())
    out = []
    for name, value in controls:
        area, effect, default = _CONTROL_EFFECTS.get(name, (AREA_KERNEL, "", "off"))
        out.append(SettingReading(name, value, default, area, effect, "/proc"))
    for watch in watches:
        effect = (CHILD_PERMISSION_EFFECT if HELD_BY_CHILD in watch else
                  "the kernel queues an event for every matching read, open or write of the watched files, for a "
                  "thread of this process to read (a permission event makes the call wait for its answer)")
        out.append(SettingReading("file-system watch", watch, "none", AREA_KERNEL, effect, "/proc"))
    # The process's own memory cgroup's limit, read each sweep: said where it binds over the window.
    limit = memory_limit_binds(obs)
    if limit is not None:
        _, effect, default = _CONTROL_EFFECTS["a memory limit"]
        out.append(SettingReading("a memory limit", limit.removeprefix("a memory limit of "), default, AREA_KERNEL,
                                  effect, "cgroup"))
    return out


def _priorities(obs: Observation) -> list[SettingReading]:
    """Threads the scheduler weighs differently from the default (nice, policy), from the last /proc sweep."""
    sweeps = [s for s in obs.proc if s]
    if not sweeps:
        return []
    names = {t.os_thread_id: t.name for s in obs.stacks for t in s.threads if t.os_thread_id is not None and t.name}
    out = []
    for t in sweeps[-1]:
        if (t.nice is None or t.nice == 0) and t.policy in (None, 0):
            continue
        value = ", ".join(p for p in ((f"nice {t.nice}" if t.nice else ""),
                                      (POLICY_NAMES.get(t.policy, str(t.policy)) if t.policy else "")) if p)
        out.append(SettingReading(f"priority of {names.get(t.tid) or t.comm} (thread {t.tid})", value,
                                  "nice 0, SCHED_OTHER", AREA_THREADS,
                                  "its share of a contended CPU (higher nice, BATCH or IDLE: a smaller one)", "/proc"))
    return out


def _probe_environment(payload: Mapping[str, Any], seen: set[str]) -> list[SettingReading]:
    """Variables the program set itself (``os.environ[...] = ...``): in its environment now, not at its start."""
    out = []
    rows = payload.get(SettingsKeys.ENVIRONMENT)
    for row in rows if isinstance(rows, list) else ():
        if not (isinstance(row, list) and len(row) == 2 and all(isinstance(x, str) for x in row)):
            continue
        name, value = row
        var = ENV_BY_NAME.get(name)
        if var is None or name in seen or var.is_default(value):
            continue
        out.append(SettingReading(name=name, value=value, default=var.default, area=var.area, effect=var.effect,
                                  source="set by the program"))
    return out


# logging's level numbers, as a user writes them.
_LEVELS = {10: "DEBUG", 20: "INFO", 30: "WARNING", 40: "ERROR", 50: "CRITICAL"}


_GC_DEBUG_FLAGS = ((1, "DEBUG_STATS"), (2, "DEBUG_COLLECTABLE"), (4, "DEBUG_UNCOLLECTABLE"), (32, "DEBUG_SAVEALL"))


def _gc_debug_names(flags: int) -> str:
    """``gc.get_debug()``'s bits by name (``DEBUG_STATS|DEBUG_SAVEALL``); unknown bits as a number."""
    names = [name for bit, name in _GC_DEBUG_FLAGS if flags & bit]
    rest = flags & ~sum(bit for bit, _ in _GC_DEBUG_FLAGS)
    return "|".join(names + ([str(rest)] if rest else []))


def _logging(interp: Mapping[str, Any]) -> list[SettingReading]:
    """The root logger below WARNING, loggers set to DEBUG, warnings filters that act every time."""
    out = []
    root = interp.get(SettingsKeys.LOGGING_ROOT_LEVEL)
    if isinstance(root, int) and not isinstance(root, bool) and 0 < root < 30:
        out.append(SettingReading("logging.getLogger().level", _LEVELS.get(root, str(root)), "WARNING", AREA_DEBUG,
                                  "the root logger's level: every logger without its own lets records of this level "
                                  "through", "probe"))
    loggers = interp.get(SettingsKeys.LOGGERS_AT_DEBUG)
    if isinstance(loggers, list) and loggers:
        out.append(SettingReading("logging.getLogger(NAME).level", "DEBUG for " + ", ".join(str(n) for n in loggers[:4]),
                                  "NOTSET (the root logger's)", AREA_DEBUG,
                                  "loggers that make a record of every debug call", "probe"))
    actions = interp.get(SettingsKeys.WARNINGS_ACTIONS)
    always = [str(a) for a in actions if str(a).startswith("always")] if isinstance(actions, list) else []
    if always:
        out.append(SettingReading("warnings.filters", ", ".join(always[:4]), "default (once per location)", AREA_DEBUG,
                                  "every warning is formatted and shown each time it is raised", "probe"))
    timers = interp.get(SettingsKeys.INTERVAL_TIMERS)
    for row in timers if isinstance(timers, list) else ():
        if isinstance(row, list) and len(row) == 3 and isinstance(row[1], int | float) and row[1] > 0:
            out.append(SettingReading(f"signal.setitimer({row[0]})", f"every {_interval_text(float(row[1]))}, "
                                      f"handler {row[2]}", "off", AREA_DEBUG,
                                      "a repeating timer: its signal's handler runs in the main thread at every tick "
                                      "(a sampling profiler, a watchdog)", "probe"))
    return out


def _interval_text(seconds: float) -> str:
    return f"{seconds * 1e3:g} ms" if seconds < 1.0 else f"{seconds:g} s"


def _interpreter(payload: Mapping[str, Any]) -> list[SettingReading]:
    interp = _sub(payload, SettingsKeys.INTERPRETER)
    out = []
    interval = interp.get(SettingsKeys.SWITCH_INTERVAL_S)
    if isinstance(interval, int | float) and not isinstance(interval, bool) and \
            abs(interval - DEFAULT_SWITCH_INTERVAL_S) > 1e-9:
        out.append(SettingReading("sys.getswitchinterval()", f"{interval:g} s", f"{DEFAULT_SWITCH_INTERVAL_S:g} s",
                                  AREA_GIL, "how long a thread may hold the GIL while another wants it", "probe"))
    if interp.get(SettingsKeys.GC_ENABLED) is False:
        out.append(SettingReading("gc.isenabled()", "False", "True", AREA_COLLECTOR,
                                  "the cyclic collector does not run on its own (memory of cycles grows)", "probe"))
    threshold, default = interp.get(SettingsKeys.GC_THRESHOLD), interp.get(SettingsKeys.GC_DEFAULT_THRESHOLD)
    if isinstance(threshold, list) and isinstance(default, list) and threshold != default:
        out.append(SettingReading("gc.get_threshold()", _tuple(threshold), _tuple(default), AREA_COLLECTOR,
                                  "allocations that start a collection, per generation (lower: more often)",
                                  "probe"))
    debug = interp.get(SettingsKeys.GC_DEBUG)
    if isinstance(debug, int) and not isinstance(debug, bool) and debug:
        garbage = interp.get(SettingsKeys.GC_GARBAGE)
        kept = f"; gc.garbage holds {garbage:,} objects" if isinstance(garbage, int) and garbage else ""
        out.append(SettingReading("gc.get_debug()", _gc_debug_names(debug), "0", AREA_COLLECTOR,
                                  "the collector's debugging: DEBUG_STATS and DEBUG_COLLECTABLE print in every pause, "
                                  "DEBUG_SAVEALL keeps every collected object in gc.garbage (memory grows, each "
                                  "collection walks them again)" + kept, "probe"))
    callbacks = interp.get(SettingsKeys.GC_CALLBACKS)
    if isinstance(callbacks, list) and callbacks:
        out.append(SettingReading("gc.callbacks", ", ".join(str(c) for c in callbacks[:4]), "none", AREA_COLLECTOR,
                                  "called at the start and end of every collection: their work is part of each pause",
                                  "probe"))
    out += _logging(interp)
    prec = interp.get(SettingsKeys.DECIMAL_PREC)
    if isinstance(prec, int) and not isinstance(prec, bool) and prec != DEFAULT_DECIMAL_PREC:
        out.append(SettingReading("decimal.DefaultContext.prec", str(prec), str(DEFAULT_DECIMAL_PREC), AREA_NUMERICS,
                                  "the digits every Decimal result keeps in each thread whose context is copied from "
                                  "it (every new thread's): more digits, slower Decimal arithmetic", "probe"))
    limit = interp.get(SettingsKeys.RECURSION_LIMIT)
    if isinstance(limit, int) and not isinstance(limit, bool) and limit != DEFAULT_RECURSION_LIMIT:
        out.append(SettingReading("sys.getrecursionlimit()", str(limit), str(DEFAULT_RECURSION_LIMIT), AREA_DEBUG,
                                  "the deepest Python stack", "probe"))
    for key, name, effect in ((SettingsKeys.TRACER, "a trace function for new threads",
                               "called on every line and call of every new thread (debuggers, coverage)"),
                              (SettingsKeys.PROFILE_HOOK, "a profile function for new threads",
                               "called on every call of every new thread (profilers)")):
        hook = interp.get(key)
        if isinstance(hook, str) and hook:
            out.append(SettingReading(name, hook, "None", AREA_DEBUG, effect, "probe"))
    tools = interp.get(SettingsKeys.MONITORING_TOOLS)
    if isinstance(tools, list) and tools:
        out.append(SettingReading("sys.monitoring tools", ", ".join(str(t) for t in tools[:4]), "none", AREA_DEBUG,
                                  "callbacks on code events (coverage, debuggers)", "probe"))
    frames = interp.get(SettingsKeys.TRACEMALLOC_FRAMES)
    if isinstance(frames, int) and not isinstance(frames, bool) and frames > 0:
        out.append(SettingReading("tracemalloc", f"tracing, {frames} frame{'s' if frames != 1 else ''} per allocation",
                                  "off", AREA_MEMORY, "every Python allocation records its traceback", "probe"))
    tracers = interp.get(SettingsKeys.THREAD_TRACERS)
    for row in tracers if isinstance(tracers, list) else ():
        if isinstance(row, list) and len(row) == 2 and all(isinstance(x, str) for x in row):
            out.append(SettingReading(f"trace function of thread {row[0]}", row[1], "None", AREA_DEBUG,
                                      "called on every line, call and return the thread runs", "probe"))
    if interp.get(SettingsKeys.DEV_MODE) is True:
        out.append(SettingReading("sys.flags.dev_mode", "True", "False", AREA_DEBUG,
                                  "the development mode: debug allocator hooks, more checks", "probe"))
    xoptions = interp.get(SettingsKeys.XOPTIONS)
    if isinstance(xoptions, list) and xoptions:
        out.append(SettingReading("-X options", " ".join(f"-X {x}" for x in xoptions[:6]), "none", AREA_DEBUG,
                                  "interpreter options", "probe"))
    return out


def _torch(payload: Mapping[str, Any], *, ours: bool = False) -> list[SettingReading]:
    """torch's flags away from their defaults; ``ours``: the sync debug mode is the syncs probe's (not listed)."""
    flags = _sub(payload, SettingsKeys.TORCH_FLAGS)
    if not flags:
        return []
    out = []
    cores = payload.get(SettingsKeys.CPU_CORES)
    threads = flags.get(SettingsKeys.NUM_THREADS)
    if isinstance(threads, int) and isinstance(cores, int) and cores > 0 and threads > cores:
        # torch's default is one thread per physical core, at most the CPUs the process may use: more is never
        # the default.
        out.append(SettingReading("torch.get_num_threads()", str(threads), f"at most {cores} (the CPUs it may use)",
                                  AREA_THREADS, "threads of each intra-op parallel region", "probe"))
    engine, engine_default = flags.get(SettingsKeys.QUANTIZED_ENGINE), flags.get(SettingsKeys.QUANTIZED_ENGINE_DEFAULT)
    if isinstance(engine, str) and isinstance(engine_default, str) and engine != engine_default:
        out.append(SettingReading("torch.backends.quantized.engine", engine, engine_default, AREA_NUMERICS,
                                  "the library that runs quantized (int8) ops: another CPU's kernels (qnnpack is "
                                  "for ARM phones; fbgemm and x86 for x86 servers) run slower here", "probe"))
    for key, name, default, area, effect in _TORCH_FLAGS:
        value = flags.get(key)
        if value is None or value == default:
            continue
        if ours and key == SettingsKeys.CUDA_SYNC_DEBUG_MODE and value == SYNCS_PROBE_SYNC_MODE:
            continue
        out.append(SettingReading(name, str(value), str(default), area, effect, "probe"))
    return out


def calls(payload: Mapping[str, Any]) -> list[SettingReading]:
    """The calls that changed a setting, one reading per (call, argument, site)."""
    out = []
    rows = payload.get(SettingsKeys.SETTING_CALLS)
    for row in rows if isinstance(rows, list) else ():
        if not isinstance(row, Mapping):
            continue
        call, arg, site = row.get(SettingsKeys.CALL), row.get(SettingsKeys.ARG), row.get(SettingsKeys.SITE)
        if not isinstance(call, str) or call in _HARMLESS_CALLS:
            continue
        area, effect = _CALL_EFFECTS.get(call, (AREA_DEBUG, "a process-wide setting"))
        count = row.get(SettingsKeys.COUNT)
        callers = row.get(SettingsKeys.CALLERS)
        who = ", ".join(str(c) for c in callers[:4]) if isinstance(callers, list) and callers else "?"
        more = f" and {len(callers) - 4} more" if isinstance(callers, list) and len(callers) > 4 else ""
        detail = (f"called by {who}{more} at {site if isinstance(site, str) else '?'}"
                  f" ({count if isinstance(count, int) else '?'} call{'s' if count != 1 else ''})")
        out.append(SettingReading(call, arg if isinstance(arg, str) else "", "not called", area, effect, "call",
                                  detail))
    return out


def by_area(readings: tuple[SettingReading, ...], area: str) -> tuple[SettingReading, ...]:
    return tuple(r for r in readings if r.area == area)


def _tuple(values: list[Any]) -> str:
    return "(" + ", ".join(str(v) for v in values) + ")"
