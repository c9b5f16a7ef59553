"""settings: the process-wide settings no stack shows, and the pauses of the garbage collector.

What it publishes (``SettingsKeys``; the defaults each is compared with are in ``dflash_contract.settings``):

- **the interpreter**: ``sys.getswitchinterval()``, the collector's state and thresholds (and this version's
  default), objects frozen out of its reach, the recursion limit, a tracer or profiler set for new threads,
  ``sys.monitoring`` tools, the development mode and the ``-X`` options;
- **the collector's pauses**: every collection timed from its start to its end through ``gc.callbacks`` (every
  thread is stopped meanwhile): collections by generation, total and longest pause, the share of the last
  ``recent_window_s`` it took; ``gc.collect()`` calls the program made, with where;
- **torch's process-wide modes and flags**, once the program imported torch (never before: ``import probes`` does
  not import torch): intra-op and inter-op threads, deterministic algorithms, anomaly detection, the autograd
  profiler, float32 matmul precision, TF32, cuDNN benchmark/deterministic/enabled, oneDNN, the CUDA sync debug
  mode (only once the program initialised CUDA), the default dtype;
- **the known environment variables** in ``os.environ`` now (what the program set itself is not in
  ``/proc/PID/environ``, which the tool reads from outside);
- **library constants the program changed**: a loaded library module's or class's constant (named in capitals)
  whose live value differs from what its source assigns (``SortedList.DEFAULT_LOAD_FACTOR = 16``;
  ``probes.libsettings``: each module parsed once, within a small budget per publish);
- **the calls that changed a setting**: ``torch.set_num_threads`` and its kin, ``gc.set_threshold``/``disable``/
  ``freeze``, ``sys.setswitchinterval``: the argument, the threads that called, where, how often. Several of these
  are per thread (torch's intra-op thread count is OpenMP's per-thread setting), so the calls are what tells
  what each thread runs with. torch's functions are wrapped the moment torch's import finishes (a
  ``sys.meta_path`` entry waits for it) or, when the probes start later (attach), at the next publish.

Never raises into the program (every wrapper and the callback catch everything and count it), keeps bounded
memory (``max_pauses``, ``max_calls``), and costs a clock read and a deque append per collection plus one frame
lookup per wrapped call (``bench/settings_probe.py``; docs/probes.md).
"""

from __future__ import annotations

import gc
import os
import platform
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dflash_contract.board import STATUS_OK, PayloadKeys, ProbeName, SettingsKeys
from dflash_contract.settings import gc_default_thresholds, known_env
from probes._common import HookGuard, JsonDict, loaded_module, thread_name
from probes.libsettings import Config as LibraryConfig
from probes.libsettings import LibrarySettings

_SITE_CHARS = 160
_PROBES_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


@dataclass(frozen=True, kw_only=True)
class Config:
    recent_window_s: float = 10.0  # the collector's recent pause share is over this long
    max_pauses: int = 8192  # collections remembered for it (bounded; a collection is ~100 bytes)
    max_calls: int = 32  # distinct (call, argument, site) rows
    max_callers: int = 8  # thread names kept per row
    library: LibraryConfig = field(default_factory=LibraryConfig)  # library constants changed at run time


_GC_CALLS = ("collect", "set_threshold", "disable", "enable", "freeze", "unfreeze")
_TORCH_CALLS = ("set_num_threads", "set_num_interop_threads", "use_deterministic_algorithms",
                "set_float32_matmul_precision", "set_default_dtype")
_AUTOGRAD_CALLS = ("set_detect_anomaly",)


class SettingsProbe:
    name = "settings"

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or Config()
        self._guard = HookGuard()
        self._lock = threading.Lock()
        self._pauses: deque[tuple[float, float]] = deque(maxlen=self.config.max_pauses)  # (end, seconds)
        self._gc_start: float | None = None
        self._collections = 0
        self._by_generation = [0, 0, 0]
        self._pause_total_s = 0.0
        self._pause_max_s = 0.0
        self._explicit = 0
        self._since_wall_s = time.time()
        self._calls: dict[tuple[str, str, str], JsonDict] = {}
        self._patched: list[tuple[Any, str, Any]] = []  # (owner, attribute, original)
        self._library = LibrarySettings(self.config.library)
        self._torch_armed = False
        self._closed = False
        self._finder: _AfterImport | None = None
        # Every callback of the program runs inside the pause too (a heap walk in one is a pause of its own): the
        # start is timed before all of them, the end after all of them (kept last, below).
        gc.callbacks.insert(0, self._gc_begin)
        gc.callbacks.append(self._gc_end)
        self._patch(gc, _GC_CALLS, "gc")
        self._patch(sys, ("setswitchinterval",), "sys")
        torch = loaded_module("torch")
        if torch is not None:
            self._arm_torch(torch)
        elif "torch" not in sys.modules:
            self._finder = _AfterImport("torch", self._arm_torch)
            sys.meta_path.insert(0, self._finder)

    # --- the collector ---------------------------------------------------------------------------------------

    def _gc_begin(self, phase: str, info: dict[str, Any]) -> None:
        if phase != "start":
            return
        try:
            self._gc_start = time.perf_counter()
            callbacks = gc.callbacks
            if callbacks and callbacks[-1] is not self._gc_end and not self._closed:
                # A callback the program appended since: move the end behind it. Safe while CPython walks the list
                # (it reads item i each time): this entry is at index 0, the one moved sits further on.
                try:
                    callbacks.remove(self._gc_end)
                except ValueError:
                    pass
                callbacks.append(self._gc_end)
        except Exception as exc:  # never into the collector: it runs inside any allocation of the program
            self._guard.failed(exc)

    def _gc_end(self, phase: str, info: dict[str, Any]) -> None:
        if phase != "stop":
            return
        self._on_gc(phase, info)

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        try:
            now = time.perf_counter()
            start, self._gc_start = self._gc_start, None
            if start is None:
                return
            pause = now - start
            generation = info.get("generation")
            # No lock here: a collection can start inside any allocation, in a thread that holds this probe's lock
            # (the snapshot's own allocations did, at a rank's start: the callback waited for its own thread
            # forever). Collections never overlap (the collector runs one at a time under the GIL), so this
            # callback is the only writer of these counters, and a deque's append is atomic.
            self._collections += 1
            if isinstance(generation, int) and 0 <= generation < 3:
                self._by_generation[generation] += 1
            self._pause_total_s += pause
            self._pause_max_s = max(self._pause_max_s, pause)
            self._pauses.append((time.monotonic(), pause))
        except Exception as exc:  # never into the collector: it runs inside any allocation of the program
            self._guard.failed(exc)

    # --- the calls that change a setting ------------------------------------------------------------------

    def _patch(self, owner: Any, names: tuple[str, ...], prefix: str) -> None:
        for name in names:
            original = getattr(owner, name, None)
            if original is None or getattr(original, "_dflash_diag_settings", False):
                continue
            wrapper = self._wrapper(f"{prefix}.{name}", original)
            try:
                setattr(owner, name, wrapper)
            except (AttributeError, TypeError) as exc:
                self._guard.failed(exc)
                continue
            self._patched.append((owner, name, original))

    def _wrapper(self, call: str, original: Callable[..., Any]) -> Callable[..., Any]:
        note = self._note

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                note(call, args, kwargs, sys._getframe(1))
            except Exception as exc:
                self._guard.failed(exc)
            return original(*args, **kwargs)

        wrapper._dflash_diag_settings = True  # type: ignore[attr-defined]
        wrapper.__wrapped__ = original  # type: ignore[attr-defined]
        wrapper.__name__ = getattr(original, "__name__", call)
        wrapper.__doc__ = getattr(original, "__doc__", None)
        return wrapper

    def _note(self, call: str, args: tuple[Any, ...], kwargs: dict[str, Any], frame: Any) -> None:
        if self._closed or frame.f_code.co_filename.startswith(_PROBES_DIR):
            return  # the probes' own calls (current_frames() holds the collector off): not the program's settings
        if call == "gc.collect":
            self._explicit += 1
        arg = ", ".join([repr(a)[:40] for a in args] + [f"{k}={v!r}"[:40] for k, v in kwargs.items()])
        site = f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno} ({frame.f_code.co_name})"[:_SITE_CHARS]
        key = (call, arg, site)
        caller = thread_name()
        with self._lock:
            row = self._calls.get(key)
            if row is None:
                if len(self._calls) >= self.config.max_calls:
                    return
                row = self._calls[key] = {SettingsKeys.CALL: call, SettingsKeys.ARG: arg, SettingsKeys.SITE: site,
                                          SettingsKeys.COUNT: 0, SettingsKeys.CALLERS: []}
            row[SettingsKeys.COUNT] += 1
            row[SettingsKeys.LAST_WALL_S] = time.time()
            callers = row[SettingsKeys.CALLERS]
            if caller not in callers and len(callers) < self.config.max_callers:
                callers.append(caller)

    def _arm_torch(self, torch: Any) -> None:
        if self._torch_armed or self._closed:
            return
        self._torch_armed = True
        try:
            self._patch(torch, _TORCH_CALLS, "torch")
            autograd = getattr(torch, "autograd", None)
            if autograd is not None:
                self._patch(autograd, _AUTOGRAD_CALLS, "torch.autograd")
        except Exception as exc:
            self._guard.failed(exc)

    # --- the snapshot ------------------------------------------------------------------------------------------

    def snapshot(self, now_s: float) -> JsonDict:
        torch = loaded_module("torch")
        if torch is not None and not self._torch_armed:
            self._arm_torch(torch)
        out: JsonDict = {
            PayloadKeys.STATUS: STATUS_OK,
            SettingsKeys.INTERPRETER: _interpreter((self._gc_begin, self._gc_end)),
            SettingsKeys.COLLECTOR: self._collector(),
            SettingsKeys.ENVIRONMENT: [list(pair) for pair in known_env(_environ_now())],
            SettingsKeys.CPU_CORES: _cpu_cores(),
            PayloadKeys.HOOK_ERRORS: self._guard.errors,
            PayloadKeys.LAST_HOOK_ERROR: self._guard.last_error,
        }
        if torch is not None:
            out[SettingsKeys.TORCH_FLAGS] = _torch_flags(torch, self._guard)
        try:
            self._library.scan()
            out[SettingsKeys.LIBRARY_CHANGES] = self._library.changed()
            out[SettingsKeys.LIBRARY_MODULES_READ] = self._library.modules_read
            out[SettingsKeys.LIBRARY_PARSE_MS] = round(1e3 * self._library.read_s, 1)
        except Exception as exc:  # a module's namespace changing under the read: never the program's problem
            self._guard.failed(exc)
        with self._lock:
            out[SettingsKeys.SETTING_CALLS] = sorted(
                ({**row, SettingsKeys.CALLERS: list(row[SettingsKeys.CALLERS])} for row in self._calls.values()),
                key=lambda r: r.get(SettingsKeys.LAST_WALL_S, 0.0))
        return out

    def _collector(self) -> JsonDict:
        """The collector's counters, read without the lock its callback never takes (see ``_on_gc``): a collection
        may run in the middle of this read, so the numbers are each right, if not all of one instant."""
        now = time.monotonic()
        horizon = now - self.config.recent_window_s
        pauses = self._recent_pauses(horizon)
        recent = [p for end, p in pauses if end >= horizon]
        window = min(self.config.recent_window_s, max(1e-3, time.time() - self._since_wall_s))
        return {
            SettingsKeys.COLLECTIONS: self._collections,
            SettingsKeys.COLLECTIONS_BY_GENERATION: list(self._by_generation),
            SettingsKeys.PAUSE_S_TOTAL: self._pause_total_s,
            SettingsKeys.PAUSE_MAX_MS: 1000.0 * self._pause_max_s,
            SettingsKeys.RECENT_COLLECTIONS: len(recent),
            SettingsKeys.RECENT_PAUSE_SHARE: min(1.0, sum(recent) / window),
            SettingsKeys.RECENT_WINDOW_S: window,
            SettingsKeys.EXPLICIT_COLLECTS: self._explicit,
            SettingsKeys.TIMED_SINCE_WALL_S: self._since_wall_s,
        }

    def _recent_pauses(self, horizon: float) -> list[tuple[float, float]]:
        """Drop pauses older than the horizon and copy the rest; popleft and append are atomic, and a collection
        that appends while the copy is taken makes it start again (at most a few times: collections are rare)."""
        try:
            while self._pauses and self._pauses[0][0] < horizon - 1.0:
                self._pauses.popleft()
        except IndexError:
            pass
        for _ in range(4):
            try:
                return list(self._pauses)
            except RuntimeError:  # "deque mutated during iteration": a collection ran in the copy
                continue
        return []

    def close(self) -> None:
        self._closed = True
        for callback in (self._gc_begin, self._gc_end):
            try:
                gc.callbacks.remove(callback)
            except ValueError:
                pass
        for owner, name, original in reversed(self._patched):
            try:
                if getattr(getattr(owner, name, None), "__wrapped__", None) is original:
                    setattr(owner, name, original)
            except (AttributeError, TypeError):
                pass
        self._patched.clear()
        if self._finder is not None:
            try:
                sys.meta_path.remove(self._finder)
            except ValueError:
                pass


def _interpreter(own: tuple[Any, ...] = ()) -> JsonDict:
    monitoring = getattr(sys, "monitoring", None)
    tools: list[str] = []
    if monitoring is not None:
        for tool_id in range(6):
            try:
                name = monitoring.get_tool(tool_id)
            except Exception:
                name = None
            if name:
                tools.append(str(name)[:40])
    threshold = gc.get_threshold()
    default = gc_default_thresholds()
    return {
        SettingsKeys.PYTHON_VERSION: f"{sys.version_info[0]}.{sys.version_info[1]}",
        SettingsKeys.SWITCH_INTERVAL_S: sys.getswitchinterval(),
        SettingsKeys.GC_ENABLED: gc.isenabled(),
        SettingsKeys.GC_THRESHOLD: list(threshold),
        SettingsKeys.GC_DEFAULT_THRESHOLD: list(default) if default is not None else None,
        SettingsKeys.GC_FROZEN: gc.get_freeze_count() if hasattr(gc, "get_freeze_count") else None,
        SettingsKeys.GC_CALLBACKS: [name for name in (_hook_name(cb) for cb in list(gc.callbacks)[:16] if cb not in own)
                                    if name],
        SettingsKeys.GC_DEBUG: gc.get_debug(),
        SettingsKeys.GC_GARBAGE: len(gc.garbage),
        SettingsKeys.RECURSION_LIMIT: sys.getrecursionlimit(),
        # Trace and profile functions are per thread: what threading hands every new thread, and the board thread's.
        SettingsKeys.TRACER: _hook_name(getattr(threading, "_trace_hook", None) or sys.gettrace()),
        SettingsKeys.PROFILE_HOOK: _hook_name(getattr(threading, "_profile_hook", None) or sys.getprofile()),
        SettingsKeys.MONITORING_TOOLS: tools,
        SettingsKeys.DEV_MODE: bool(sys.flags.dev_mode),
        SettingsKeys.TRACEMALLOC_FRAMES: _tracemalloc_frames(),
        SettingsKeys.DECIMAL_PREC: _decimal_prec(),
        SettingsKeys.THREAD_TRACERS: (tracers := _thread_tracers()),
        # Measured only where something traces: a thread's frames, or the hook every new thread gets.
        SettingsKeys.TRACE_LINE_SLOWDOWN: _trace_line_slowdown() if tracers or getattr(threading, "_trace_hook", None)
        else None,
        SettingsKeys.XOPTIONS: sorted(k if v is True else f"{k}={v}"[:60] for k, v in sys._xoptions.items())[:16],
        **_logging_and_warnings(),
        SettingsKeys.INTERVAL_TIMERS: _interval_timers(),
    }


def _writes(logging: Any, logger: Any) -> bool:
    """The logger has a handler that writes somewhere (a stream or file handler with its stream open)."""
    return any(isinstance(h, logging.StreamHandler) and getattr(h, "stream", None) is not None
               for h in getattr(logger, "handlers", ()))


# The interval timers and the signal each delivers (setitimer's three clocks).
_TIMERS = (("ITIMER_REAL", "SIGALRM"), ("ITIMER_VIRTUAL", "SIGVTALRM"), ("ITIMER_PROF", "SIGPROF"))


def _interval_timers() -> list[list[Any]]:
    """Timers set to repeat, and who handles their signal: a Python handler runs in the main thread at every tick
    (between two bytecodes), whatever that thread was doing."""
    out: list[list[Any]] = []
    for timer, sig in _TIMERS:
        which, signum = getattr(signal, timer, None), getattr(signal, sig, None)
        if which is None or signum is None:
            continue
        try:
            _, interval_s = signal.getitimer(which)
            handler = signal.getsignal(signum)
        except (OSError, ValueError):
            continue
        if interval_s <= 0:
            continue
        name = ("default" if handler == signal.SIG_DFL else "ignored" if handler == signal.SIG_IGN else
                "native" if handler is None else _hook_name(handler) or "?")
        out.append([timer, float(interval_s), name])
    return out


MAX_LOGGERS_READ = 4096  # a program's loggers read for their level, at most (a bounded walk of a dict)


def _logging_and_warnings() -> JsonDict:
    """The root logger's level, the loggers set to DEBUG or below, and the warnings filters that act on every
    warning, where the program imported those modules (this never imports them). Names are the program's own
    (logger names are module paths); the board is private to the user."""
    out: JsonDict = {}
    logging = sys.modules.get("logging")
    if logging is not None:
        try:
            out[SettingsKeys.LOGGING_ROOT_LEVEL] = int(logging.root.level)
            at_debug: list[str] = []
            root_writes = _writes(logging, logging.root)
            for i, (name, logger) in enumerate(list(logging.Logger.manager.loggerDict.items())):
                if i >= MAX_LOGGERS_READ or len(at_debug) >= 4:
                    break
                level = getattr(logger, "level", 0)  # placeholders have none
                # Only a logger whose records reach a stream counts: torch's artifact loggers sit at DEBUG with no
                # output until their environment variable turns them on.
                if isinstance(level, int) and 0 < level <= logging.DEBUG and not logger.disabled and (
                        _writes(logging, logger) or (logger.propagate and root_writes)):
                    at_debug.append(str(name)[:60])
            out[SettingsKeys.LOGGERS_AT_DEBUG] = at_debug
        except Exception:
            pass  # a program's odd logging setup never breaks the snapshot
    warnings = sys.modules.get("warnings")
    if warnings is not None:
        try:
            # Only a filter for every message of a category from every module: one for a single message (libraries
            # add such) is not a process-wide setting.
            # ... of a built-in category: a library's filter for its own warning class (numpy's RankWarning) is
            # its default, not the program's setting.
            actions = [f"{f[0]} ({getattr(f[2], '__name__', '?')})" for f in list(warnings.filters)[:64]
                       if len(f) == 5 and f[0] in ("always", "error") and not f[1] and not f[3]
                       and getattr(f[2], "__module__", "") == "builtins"]
            out[SettingsKeys.WARNINGS_ACTIONS] = sorted(set(actions))[:4]
        except Exception:
            pass
    return out


def _tracemalloc_frames() -> int | None:
    """The traceback depth tracemalloc records per allocation while it traces (0 when it does not), None when this
    interpreter has no tracemalloc. ``_tracemalloc`` is built in: reading it imports nothing."""
    try:
        import _tracemalloc
    except ImportError:
        return None
    try:
        return int(_tracemalloc.get_traceback_limit()) if _tracemalloc.is_tracing() else 0
    except Exception:
        return None


MAX_TRACED_THREADS = 16
MAX_FRAMES_WALKED = 256


_SLOWDOWN: list[float] = []  # measured once per process: the interpreter's cost does not change


def _trace_line_slowdown() -> float | None:
    """How many times slower a Python line runs under an empty trace function than under none: a 200-line loop
    timed 5 times each way in this (board) thread, whose own trace function is set for the loop and restored. The
    program's tracer does at least this much per line. About a millisecond, once."""
    if _SLOWDOWN:
        return _SLOWDOWN[0]

    def empty(frame: Any, event: str, arg: Any) -> Any:
        return empty

    def loop() -> float:
        # Lines that allocate nothing (small ints are cached): tracemalloc or an allocator setting weigh both ways
        # the same, and only the trace function differs.
        start = time.perf_counter()
        for i in range(200):
            x = i
            x = x
        return time.perf_counter() - start

    previous = sys.gettrace()
    try:
        sys.settrace(None)
        plain = min(loop() for _ in range(5))
        sys.settrace(empty)
        traced = min(loop() for _ in range(5))
    except Exception:
        return None
    finally:
        sys.settrace(previous)
    if plain <= 0:
        return None
    _SLOWDOWN.append(round(traced / plain, 1))
    return _SLOWDOWN[0]


def _thread_tracers() -> list[list[str]]:
    """Threads a trace function runs in, found as a frame's ``f_trace`` (set by the tracer on the frames it traces:
    a Python tracer's local function, coverage's C tracer): [thread name, hook name]. Bounded walk of each stack;
    this (board) thread is skipped: its own tracer is ``sys.gettrace()``, read with threading's hook."""
    names = {t.ident: t.name for t in threading.enumerate()}
    me = threading.get_ident()
    out: list[list[str]] = []
    try:
        frames = sys._current_frames()
    except Exception:
        return out
    for ident, frame in frames.items():
        if ident == me:
            continue
        walked = 0
        while frame is not None and walked < MAX_FRAMES_WALKED:
            hook = frame.f_trace
            if hook is not None:
                out.append([str(names.get(ident, ident))[:60], _hook_name(hook) or "?"])
                break
            frame, walked = frame.f_back, walked + 1
        if len(out) >= MAX_TRACED_THREADS:
            break
    del frames  # the frames hold every thread's locals alive: let them go now
    return out


def _hook_name(hook: Any) -> str | None:
    if hook is None:
        return None
    module = getattr(hook, "__module__", None) or type(hook).__module__
    name = getattr(hook, "__qualname__", None) or type(hook).__qualname__
    text = f"{module}.{name}"
    # A long qualified name keeps its end (the function's own name), not the start of a long path of enclosing scopes.
    return text if len(text) <= 80 else f"{module}.{name.rsplit('.', 1)[-1]}"[-80:]


def _cpu_cores() -> int | None:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


def _torch_flags(torch: Any, guard: HookGuard) -> JsonDict:
    """torch's process-wide modes and flags; one that cannot be read is None (this torch has no such flag)."""
    backends = getattr(torch, "backends", None)
    cuda_backend = getattr(backends, "cuda", None)
    cudnn = getattr(backends, "cudnn", None)
    mkldnn = getattr(backends, "mkldnn", None)
    readers: dict[str, Callable[[], Any]] = {
        SettingsKeys.NUM_THREADS: torch.get_num_threads,
        SettingsKeys.NUM_INTEROP_THREADS: torch.get_num_interop_threads,
        SettingsKeys.DETERMINISTIC_ALGORITHMS: torch.are_deterministic_algorithms_enabled,
        SettingsKeys.ANOMALY_DETECTION: torch.is_anomaly_enabled,
        SettingsKeys.AUTOGRAD_PROFILER: lambda: bool(torch.autograd.profiler._is_profiler_enabled),
        SettingsKeys.FLOAT32_MATMUL_PRECISION: torch.get_float32_matmul_precision,
        SettingsKeys.CUDA_MATMUL_ALLOW_TF32: lambda: bool(cuda_backend.matmul.allow_tf32),
        SettingsKeys.CUDNN_ALLOW_TF32: lambda: bool(cudnn.allow_tf32),
        SettingsKeys.CUDNN_BENCHMARK: lambda: bool(cudnn.benchmark),
        SettingsKeys.CUDNN_DETERMINISTIC: lambda: bool(cudnn.deterministic),
        SettingsKeys.CUDNN_ENABLED: lambda: bool(cudnn.enabled),
        SettingsKeys.MKLDNN_ENABLED: lambda: bool(mkldnn.enabled),
        SettingsKeys.OPT_EINSUM_ENABLED: lambda: bool(backends.opt_einsum.enabled)
        if backends.opt_einsum.is_available() else None,
        SettingsKeys.QUANTIZED_ENGINE: lambda: str(backends.quantized.engine),
        SettingsKeys.QUANTIZED_ENGINE_DEFAULT: lambda: _default_quantized_engine(backends.quantized),
        SettingsKeys.FLASH_SDP_ENABLED: lambda: bool(cuda_backend.flash_sdp_enabled()),
        SettingsKeys.MEM_EFFICIENT_SDP_ENABLED: lambda: bool(cuda_backend.mem_efficient_sdp_enabled()),
        SettingsKeys.DEFAULT_DTYPE: lambda: str(torch.get_default_dtype()),
        SettingsKeys.CUDA_SYNC_DEBUG_MODE: lambda: _sync_debug_mode(torch),
    }
    out: JsonDict = {}
    for key, read in readers.items():
        try:
            value = read()
        except Exception:  # a flag this torch does not have
            value = None
        out[key] = value if isinstance(value, bool | int | float | str) or value is None else str(value)[:60]
    return out


def _decimal_prec() -> int | None:
    """decimal.DefaultContext's precision (every new thread's context is copied from it), where the program imported
    decimal: the probe never imports it."""
    module = sys.modules.get("decimal")
    try:
        prec = module.DefaultContext.prec if module is not None else None
    except Exception:
        return None
    return prec if isinstance(prec, int) else None


def _default_quantized_engine(quantized: Any) -> str | None:
    """The engine torch picks for this machine when nobody sets one: x86 (else fbgemm) on x86-64, qnnpack on ARM."""
    supported = [str(e) for e in quantized.supported_engines]
    machine = platform.machine().lower()
    wanted = ("x86", "fbgemm") if machine in ("x86_64", "amd64", "i686") else ("qnnpack",)
    return next((e for e in wanted if e in supported), None)


def _sync_debug_mode(torch: Any) -> int | None:
    """The CUDA sync debug mode, only once the program initialised CUDA (reading it never creates a context)."""
    cuda = getattr(torch, "cuda", None)
    if cuda is None or not cuda.is_initialized():
        return None
    return int(cuda.get_sync_debug_mode())


class _AfterImport:
    """A ``sys.meta_path`` entry that runs ``callback(module)`` right after ``name``'s import finishes, so calls the
    program makes straight after ``import torch`` are seen. It finds nothing itself: it wraps the loader the rest of
    the meta path finds, once."""

    def __init__(self, name: str, callback: Callable[[Any], None]) -> None:
        self.name = name
        self.callback = callback
        self._busy = False
        self.done = False

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != self.name or self._busy or self.done:
            return None
        self._busy = True
        try:
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
            else:
                return None
        except Exception:
            return None
        finally:
            self._busy = False
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return None
        self.done = True
        spec.loader = _CallbackLoader(loader, self.callback)
        return spec


class _CallbackLoader:
    def __init__(self, loader: Any, callback: Callable[[Any], None]) -> None:
        self._loader = loader
        self._callback = callback

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        try:
            self._loader.exec_module(module)
        finally:
            # The module keeps the loader it would have had: nothing outside this import sees the wrapper.
            spec = getattr(module, "__spec__", None)
            if spec is not None and spec.loader is self:
                spec.loader = self._loader
            if getattr(module, "__loader__", None) is self:
                module.__loader__ = self._loader
        try:
            self._callback(module)
        except Exception:  # the program's import must succeed whatever the probe does
            pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


# What the probe registry (``probes/registry.py``) reads of this module: its board name, its Config, its class.
NAME = ProbeName.SETTINGS
PROBE = SettingsProbe


ENVIRON_COPY_TRIES = 3


def _environ_now() -> dict[str, str]:
    """A copy of ``os.environ``. Its iteration is Python code over a dict: another thread of the program that sets a
    variable meanwhile makes it raise "dictionary changed size during iteration" (seen once under load in CI's
    tiny trainer run), or a KeyError where one is removed. The copy is tried again; {} where it never settles (the
    environment is then not said)."""
    for _ in range(ENVIRON_COPY_TRIES):
        try:
            return dict(os.environ)
        except (RuntimeError, KeyError):  # resized, or a key removed between its listing and its read
            continue
    return {}
