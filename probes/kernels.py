"""A torch.profiler recording started inside a running program by `dflash-diag record --kernels`
(docs/integrations.md, docs/attach.md: the ``kernels`` action).

``start`` runs in the main thread at the attach bootstrap's safe point (GIL held). It refuses, changing nothing,
when the process has not imported torch (importing it here would load hundreds of modules into a program that
never asked for them), when a profiler already runs in it or is about to (torch allows one per process: in our
tests a second one started beside a program's own made the program's stop crash the process), and when this
torch cannot record other threads. Otherwise it starts the profiler for **every thread**
(``_ExperimentalConfig(profile_all_threads=True)``, as ``torch.distributed.debug``'s profile handler does: by
default torch.profiler records only the thread that started it, here the main thread, which trains nothing),
with CUDA activities when the program already initialised CUDA (CUPTI then traces every kernel of the process);
notes clock marks (``record_function`` spans bracketed by ``time.monotonic_ns()``: they map the profiler's
timestamps onto the system's monotonic clock); counts optimizer steps with a global step post-hook; and starts
one daemon thread, ``dflash-diag-kernels``, that ends the recording at the first of:

- the steps asked for (the optimizer that stepped most: replicas that each step once count one step);
- the duration asked for (always a bound, also with steps);
- the command's stop file (an early end: ``finish`` keeps what was recorded, ``abort`` throws it away);
- the command gone (its lease: PID and start time, read from /proc every half second): the recording is
  thrown away; nobody is left to read it;
- the program starting a profiler of its own (``torch.autograd.profiler._prepare_profiler``, the first step of
  every profiler torch offers, is wrapped while we record): ours is stopped at once, in the program's thread,
  before the program's own starts: the program's profiler always wins.

Then it stops the profiler, in two steps. torch's all-threads mode (torch 2.13 and earlier) adds its op callback
for every thread, and each thread's call reads the profiler's state through a raw pointer that ``__exit__`` frees
from the stopping thread without waiting for the calls in flight: an op entering on a training thread at that moment
writes into freed memory (SIGSEGV in ``ThreadLocalSubqueue::begin_op``; bench/record_soak.py makes it happen). So
the callback is taken out first (``_toggle_collection_dynamic(False)``: no op of any thread enters the profiler
after it), the calls in flight are given ``DRAIN_S`` to leave, and only then is the profiler stopped (``__exit__``:
the GPU is synchronised from this thread, never a training thread),
takes every hook out (the step hook's handle, the wrapper), exports the trace to a private file and writes the
outcome file (through a temporary name, atomically). Stopping and exporting hold the GIL for a time that grows
with the events (measured in docs/benchmarks.md): the reason windows are bounded. Nothing stays behind: no
thread, no hook, no profiler; torch keeps the profiler's libraries loaded, as after any use of torch.profiler.

Standard library only at import; torch only through ``sys.modules``. Never raises into the program.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from dflash_contract import proc
from dflash_contract.attach import KERNELS_OUTCOME_SCHEMA as OUTCOME_SCHEMA
from dflash_contract.attach import OUTCOME_SUFFIX, STOP_SUFFIX, TMP_SUFFIX, TRACE_SUFFIX
from dflash_contract.private_file import create_private, write_private_atomic
from probes._common import JsonDict, current_frames

THREAD_NAME = "dflash-diag-kernels"
TICK_S = 0.05  # how often the end conditions are looked at: a stat of the stop file, two comparisons
LEASE_EVERY_TICKS = 10  # the lease (one read of /proc/PID/stat) every half second
OWN_THREAD_STOP_WAIT_S = 10.0  # a program starting its own profiler waits this long at most for ours to stop
MAX_STEP_MARKS = 20_000  # optimizer steps noted for the trace's step marks (the count goes on beyond)
MAX_THREADS_NAMED = 4096
# Between taking the all-threads callback out and stopping the profiler: an op callback that began before the removal
# leaves it within microseconds unless its thread is descheduled; this covers a loaded machine's scheduling delays.
DRAIN_S = 0.3
CLOCK_MARKS = 5  # at each end: the narrowest bracket is the one the tool uses
# Frames looked at for a profiler object the program holds (like the attach's discovery: bounded).
MAX_FRAMES_PER_THREAD = 48
MAX_NAMES_PER_FRAME = 256

# Refusals, by what the command should say (each has an exit code there).
NO_TORCH = "no-torch"
PROFILER_ACTIVE = "profiler-active"
UNSUPPORTED = "unsupported"

_LOCK = threading.Lock()  # start and the end never overlap
_STATE: dict[str, Recording | None] = {"recording": None}


@dataclass
class Recording:
    prefix: str
    profile: Any
    torch: Any
    steps_wanted: int | None
    deadline_mono_ns: int
    lease: JsonDict | None
    cuda: bool
    started_mono_ns: int
    clock_marks: list[JsonDict]
    step_counts: dict[int, int] = field(default_factory=dict)  # id(optimizer) -> steps seen
    optimizers: dict[int, int] = field(default_factory=dict)  # id(optimizer) -> index (first seen first)
    step_marks: list[list[int]] = field(default_factory=list)  # [monotonic ns, native thread id, optimizer index]
    step_handle: Any = None
    step_hook: bool = False  # torch has global optimizer step hooks (steps are counted)
    prepare_original: Any = None
    stopped_reason: str | None = None
    stop_began_mono_ns: int | None = None  # when the end was decided: what follows is ours (stop, export), not the program's
    stop_ms: float | None = None
    callbacks_off_mono_ns: int | None = None  # when the all-threads callback was taken out (no op enters after it)
    drain_ms: float | None = None  # from then until the profiler's stop began
    hook_errors: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    wake: threading.Event = field(default_factory=threading.Event)  # the steps are reached: end now, not at the tick
    pid: int = field(default_factory=os.getpid)
    # A torch whose profiler state is per thread (no profile_all_threads): the profiler is started and stopped on
    # the recording's own thread, and others ask that thread to stop it (``stop_request``, ``ended``).
    own_thread: bool = False
    stop_request: str | None = None
    ended: threading.Event = field(default_factory=threading.Event)

    @property
    def stopped(self) -> bool:
        return self.stopped_reason is not None

    def steps(self) -> int:
        return max(self.step_counts.values(), default=0)


def start(params: JsonDict, *, files_prefix: str, lease: JsonDict | None) -> JsonDict:
    """Start a recording (``params``: ``duration_s``, ``steps``); ``{"ok": True, "recording": ...}`` or a refusal
    ``{"ok": False, "refused": NO_TORCH | PROFILER_ACTIVE | UNSUPPORTED, "error": ...}``."""
    torch = sys.modules.get("torch")
    autograd_profiler = sys.modules.get("torch.autograd.profiler")
    if torch is None or autograd_profiler is None:
        return _refuse(NO_TORCH, "this process has not imported torch: there is nothing for torch.profiler to record")
    if _importing(torch):
        # Started in the middle of `import torch` (the safe point can fall there), the profiler would run on a torch
        # whose modules are half made.
        return _refuse(NO_TORCH, "this process is still importing torch: record again once it has started")
    if not files_prefix or not os.path.isabs(files_prefix):
        return {"ok": False, "error": "no place for the recording's files"}
    if lease is not None and not proc.process_alive(lease["pid"], lease["start_ticks"]):
        return {"ok": False, "error": f"the command that asked for the recording (PID {lease['pid']}) is gone"}
    with _LOCK:
        if _STATE["recording"] is not None:
            return _refuse(PROFILER_ACTIVE, "a `dflash-diag record --kernels` recording already runs in this process")
        busy = program_profiler(torch, autograd_profiler)
        if busy is not None:
            return _refuse(PROFILER_ACTIVE, f"{busy}: torch allows one profiler per process, and starting a second "
                                            "one beside it can crash the process when the first one stops")
        cuda = _cuda_traceable(torch)
        config: Any = None
        try:
            config = torch.profiler._ExperimentalConfig(profile_all_threads=True, trace_only=True)
            all_threads = _can_drain(torch)
        except (TypeError, AttributeError):
            all_threads = False
        if not all_threads:
            # An older torch records the CPU ops of the starting thread only (or cannot take its all-threads
            # callback out before it stops: stopping it would race the ops of every other thread). CUPTI still
            # traces every kernel and every CUDA call of the process, with the thread that made it: on CUDA that is
            # the recording's point.
            if not cuda:
                return _refuse(UNSUPPORTED, f"torch {torch.__version__} cannot record the ops of other threads "
                                            "safely (no profile_all_threads, or no way to take its callback out "
                                            "before it stops) and the process runs nothing on CUDA: nothing of its "
                                            "training threads would be recorded")
        profile: Any = None
        if all_threads:
            profile = autograd_profiler.profile(use_device="cuda" if cuda else None, use_kineto=True,
                                                experimental_config=config)
            try:
                profile.__enter__()
            except Exception as exc:  # torch refused (a profiler we could not see): nothing was started
                return _refuse(PROFILER_ACTIVE, f"torch refused to start a profiler: {type(exc).__name__}: {exc}"[:400])
        now = time.monotonic_ns()
        rec = Recording(prefix=files_prefix, profile=profile, torch=torch, steps_wanted=params.get("steps"),
                        deadline_mono_ns=now + int(float(params["duration_s"]) * 1e9), lease=lease, cuda=cuda,
                        started_mono_ns=now, clock_marks=[], own_thread=not all_threads)
        _STATE["recording"] = rec
        try:
            if not rec.own_thread:  # else marked on the recording's thread, once its profiler runs
                rec.clock_marks += clock_marks(torch, "start")
            _install_hooks(rec, autograd_profiler)
            threading.Thread(target=_watch, args=(rec,), name=THREAD_NAME, daemon=True).start()
        except Exception as exc:  # take everything out again: the program runs on as before
            _end(rec, f"failed to start: {type(exc).__name__}: {exc}"[:300])
            _STATE["recording"] = None
            return {"ok": False, "error": f"the recording could not start: {type(exc).__name__}: {exc}"[:400]}
    return {"ok": True, "error": None,
            "recording": {"cuda": cuda, "torch": str(torch.__version__), "all_threads": all_threads,
                          "duration_s": float(params["duration_s"]), "steps": rec.steps_wanted,
                          "started_mono_ns": now}}


def _importing(torch: Any) -> bool:
    """Whether ``import torch`` is still running (importlib marks the module's spec while it executes)."""
    try:
        return bool(getattr(getattr(torch, "__spec__", None), "_initializing", False))
    except Exception:
        return True


def _can_drain(torch: Any) -> bool:
    """Whether this torch can take the all-threads op callback out without stopping the profiler (see the module's
    docstring: without it, stopping races the ops of every other thread)."""
    try:
        activity = torch._C._profiler.ProfilerActivity
        return callable(torch._C._autograd._toggle_collection_dynamic) and all(
            hasattr(activity, name) for name in ("CPU", "CUDA", "XPU"))
    except AttributeError:
        return False


def _refuse(kind: str, message: str) -> JsonDict:
    return {"ok": False, "refused": kind, "error": message}


def _cuda_traceable(torch: Any) -> bool:
    """CUDA activities only in a program that already initialised CUDA (we never initialise it) with a torch
    built with CUPTI (else torch falls back to timing every op with CUDA events: far costlier)."""
    try:
        if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
            return False
        return torch.profiler.ProfilerActivity.CUDA in torch.profiler.supported_activities()
    except Exception:
        return False


# --- is a profiler of the program running, or about to? ---------------------------------------------------------


def program_profiler(torch: Any, autograd_profiler: Any) -> str | None:
    """What shows that a profiler runs in this process (or is prepared, in a schedule's warm-up), else None."""
    if getattr(autograd_profiler, "_is_profiler_enabled", False):
        return "a torch profiler is running in this process"
    try:
        if torch._C._autograd._profiler_enabled():
            return "a torch profiler is running on the main thread"
    except Exception:
        pass
    return _held_profiler(autograd_profiler)


def _held_profiler(autograd_profiler: Any) -> str | None:
    """A profiler object a running frame holds (a local, an attribute of one, or its module's global) that is
    recording or warming up (prepared: torch would refuse its start, or crash at its stop, beside ours)."""
    kineto_profile = getattr(sys.modules.get("torch.profiler.profiler"), "_KinetoProfile", None)
    kinds = tuple(k for k in (kineto_profile, getattr(autograd_profiler, "profile", None)) if isinstance(k, type))
    if not kinds:
        return None
    seen: set[int] = set()
    frames = current_frames()
    try:
        for top in list(frames.values()):
            frame: Any = top
            for _ in range(MAX_FRAMES_PER_THREAD):
                if frame is None:
                    break
                for where, value in _frame_values(frame, seen):
                    if isinstance(value, kinds) and _profiler_live(value, kineto_profile):
                        return f"the program's own profiler ({where} in {frame.f_code.co_name}) is recording or warming up"
                frame = frame.f_back
    finally:
        del frames
    return None


def _frame_values(frame: Any, seen: set[int]) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    try:
        local_items = list(frame.f_locals.items())[:MAX_NAMES_PER_FRAME]
    except Exception:
        local_items = []
    for name, value in local_items:
        out.append((str(name), value))
        try:
            attrs = object.__getattribute__(value, "__dict__")
            if isinstance(attrs, dict):
                out += [(f"{name}.{k}", v) for k, v in list(attrs.items())[:MAX_NAMES_PER_FRAME]]
        except Exception:
            continue
    module_globals = frame.f_globals
    if id(module_globals) not in seen:
        seen.add(id(module_globals))
        with contextlib.suppress(Exception):
            out += [(str(k), v) for k, v in list(module_globals.items())[:MAX_NAMES_PER_FRAME]]
    return out


def _profiler_live(value: Any, kineto_profile: type | None) -> bool:
    try:
        if kineto_profile is not None and isinstance(value, kineto_profile):
            # torch.profiler.profile with a schedule, inside its `with` (start() to stop() holds a step annotation):
            # prepared from its warm-up on. Without a schedule it has no warm-up: torch's flag says when it records.
            if not getattr(value, "record_steps", False) or getattr(value, "step_rec_fn", None) is None:
                return False
            return getattr(getattr(value, "current_action", None), "name", "") in ("WARMUP", "RECORD", "RECORD_AND_SAVE")
        # torch.autograd.profiler.profile (also the one inside the above): prepared or running until its results are in
        return bool(getattr(value, "entered", False)) and getattr(value, "kineto_results", 1) is None
    except Exception:
        return False


# --- clock marks, hooks ---------------------------------------------------------------------------------------


def clock_marks(torch: Any, where: str) -> list[JsonDict]:
    """``CLOCK_MARKS`` empty ``record_function`` spans, each bracketed by the monotonic clock (and the wall clock)."""
    marks: list[JsonDict] = []
    record_function = torch.autograd.profiler.record_function
    for i in range(CLOCK_MARKS):
        name = f"dflash-diag clock {where} {i}"
        wall_ns = time.time_ns()
        before = time.monotonic_ns()
        with record_function(name):
            pass
        after = time.monotonic_ns()
        marks.append({"name": name, "mono_ns_before": before, "mono_ns_after": after, "wall_ns": wall_ns})
    return marks


def _install_hooks(rec: Recording, autograd_profiler: Any) -> None:
    optimizer = sys.modules.get("torch.optim.optimizer")
    register = getattr(optimizer, "register_optimizer_step_post_hook", None)
    if register is not None:
        rec.step_handle = register(lambda opt, args, kwargs: _on_step(rec, opt))
        rec.step_hook = True
    original = autograd_profiler._prepare_profiler
    rec.prepare_original = original

    def prepare_profiler(*args: Any, **kwargs: Any) -> Any:
        # The program starts a profiler of its own: ours steps aside first, so the program's starts as it would have.
        # Never an exception into the program's call; never in a forked child (the recording is the parent's).
        # (Our own thread preparing a profiler is our own recording starting, where this torch keeps it per thread.)
        if os.getpid() == rec.pid and threading.current_thread().name != THREAD_NAME:
            try:
                if rec.own_thread:
                    # Only the recording's thread can stop a per-thread profiler: ask it, and wait (bounded).
                    rec.stop_request = "program-profiler"
                    rec.wake.set()
                    rec.ended.wait(OWN_THREAD_STOP_WAIT_S)
                else:
                    _stop_profiler(rec, "program-profiler")
                _restore_prepare(rec)
            except Exception:
                rec.hook_errors += 1
        return original(*args, **kwargs)

    prepare_profiler.__dflash_diag_kernels__ = True  # type: ignore[attr-defined]
    autograd_profiler._prepare_profiler = prepare_profiler


def _on_step(rec: Recording, optimizer: Any) -> None:
    try:
        key = id(optimizer)
        if key not in rec.optimizers:
            rec.optimizers[key] = len(rec.optimizers)
        count = rec.step_counts[key] = rec.step_counts.get(key, 0) + 1
        if len(rec.step_marks) < MAX_STEP_MARKS:
            rec.step_marks.append([time.monotonic_ns(), threading.get_native_id(), rec.optimizers[key]])
        if rec.steps_wanted is not None and count >= rec.steps_wanted and not rec.wake.is_set():
            rec.wake.set()
    except Exception:
        rec.hook_errors += 1


def _restore_prepare(rec: Recording) -> None:
    module = sys.modules.get("torch.autograd.profiler")
    current = getattr(module, "_prepare_profiler", None)
    if rec.prepare_original is not None and getattr(current, "__dflash_diag_kernels__", False):
        module._prepare_profiler = rec.prepare_original  # type: ignore[union-attr]


def _remove_hooks(rec: Recording) -> None:
    _restore_prepare(rec)
    handle, rec.step_handle = rec.step_handle, None
    if handle is not None:
        with contextlib.suppress(Exception):
            handle.remove()


# --- the end ---------------------------------------------------------------------------------------------------


def _stop_profiler(rec: Recording, reason: str) -> None:
    """Stop the profiler once (the first reason wins); the end marks go in just before."""
    with rec.lock:
        if rec.stopped:
            return
        rec.stop_began_mono_ns = time.monotonic_ns()
        rec.stopped_reason = reason
        try:
            rec.clock_marks += clock_marks(rec.torch, "end")
        except Exception:
            pass
        if not rec.own_thread:
            _drain(rec)
        t0 = time.perf_counter()
        try:
            rec.profile.__exit__(None, None, None)
        finally:
            rec.stop_ms = 1e3 * (time.perf_counter() - t0)


def _drain(rec: Recording) -> None:
    """Take the all-threads op callback out, then wait for the callbacks in flight to leave (``DRAIN_S``), so that
    the stop that follows frees nothing an op of another thread is using. All three activities are named: torch
    logs a warning into the program's stderr for a CPU toggle without them (CUDA's is CUPTI's collection, which
    ends here too; the stop was decided)."""
    try:
        activity = rec.torch._C._profiler.ProfilerActivity
        rec.torch._C._autograd._toggle_collection_dynamic(False, {activity.CPU, activity.CUDA, activity.XPU})
        rec.callbacks_off_mono_ns = time.monotonic_ns()
    except Exception:
        # The profiler must stop all the same (left running it would grow without bound): the wait still lets the
        # calls in flight at this moment leave, only new ones may race the stop.
        rec.hook_errors += 1
    began = time.monotonic_ns()
    time.sleep(DRAIN_S)
    rec.drain_ms = (time.monotonic_ns() - began) / 1e6


def _end_reason(rec: Recording, tick: int) -> str | None:
    if rec.stopped:
        return rec.stopped_reason
    if rec.stop_request is not None:
        return rec.stop_request
    try:
        with open(rec.prefix + STOP_SUFFIX, "rb") as fh:
            asked = fh.read(16).strip()
        # The command creates the file, then writes its word: an empty file is one being written (read as a finish,
        # an abort would keep the recording it asked to throw away), decided at a later tick.
        if asked:
            return "aborted" if asked == b"abort" else "asked"
    except OSError:
        pass
    if rec.steps_wanted is not None and rec.steps() >= rec.steps_wanted:
        return "steps"
    if time.monotonic_ns() >= rec.deadline_mono_ns:
        return "duration"
    if tick % LEASE_EVERY_TICKS == 0 and not _lease_held(rec):
        return "command-gone"
    return None


def _lease_held(rec: Recording) -> bool:
    lease = rec.lease
    return lease is None or proc.process_alive(lease["pid"], lease["start_ticks"])


def _watch(rec: Recording) -> None:
    """The recording's own thread: wait for the end, then stop, clean up, export, report. Never raises."""
    try:
        if rec.own_thread:
            try:
                # Made, started (and stopped, in _end) here: this torch keeps the profiler per thread, and kineto's
                # first set-up must run on the thread that uses it (else "External init callback must run in same
                # thread as registerClient", then a crash).
                autograd_profiler = sys.modules["torch.autograd.profiler"]
                rec.profile = autograd_profiler.profile(use_device="cuda" if rec.cuda else None, use_kineto=True)
                rec.profile.__enter__()
            except Exception as exc:
                rec.stopped_reason = f"failed to start: {type(exc).__name__}: {exc}"[:300]
                _end(rec, rec.stopped_reason, started=False)
                return
            with contextlib.suppress(Exception):
                rec.clock_marks += clock_marks(rec.torch, "start")
        tick = 0
        reason = _end_reason(rec, tick)
        while reason is None:
            rec.wake.wait(TICK_S)
            tick += 1
            reason = _end_reason(rec, tick)
        _end(rec, reason)
    except BaseException as exc:  # a daemon thread: nothing may escape, and the profiler must not stay on
        with contextlib.suppress(BaseException):
            _end(rec, f"failed: {type(exc).__name__}: {exc}"[:300])
    finally:
        _STATE["recording"] = None
        rec.ended.set()


def _end(rec: Recording, reason: str, *, started: bool = True) -> None:
    error: str | None = None if started else reason
    try:
        if started:
            _stop_profiler(rec, reason)
    except Exception as exc:
        error = f"stopping the profiler failed: {type(exc).__name__}: {exc}"[:300]
    finally:
        _remove_hooks(rec)
    outcome: JsonDict = {"schema": OUTCOME_SCHEMA, "ok": error is None, "error": error, "reason": rec.stopped_reason,
                         "cuda": rec.cuda, "torch": str(getattr(rec.torch, "__version__", "?")),
                         "started_mono_ns": rec.started_mono_ns, "stop_began_mono_ns": rec.stop_began_mono_ns,
                         "stopped_mono_ns": time.monotonic_ns(),
                         "steps": rec.steps(), "optimizers": len(rec.optimizers),
                         "step_marks": rec.step_marks, "step_hook": rec.step_hook,
                         "hook_errors": rec.hook_errors, "clock_marks": rec.clock_marks,
                         "stop_ms": rec.stop_ms, "export_ms": None, "drain_ms": rec.drain_ms,
                         "callbacks_off_mono_ns": rec.callbacks_off_mono_ns, "trace_bytes": None, "threads": thread_names()}
    keep = error is None and rec.stopped_reason not in ("aborted", "command-gone") and _lease_held(rec)
    if keep:
        outcome.update(_export(rec))
        outcome["ok"] = outcome.get("error") is None
    if _lease_held(rec):
        _write_outcome(rec.prefix + OUTCOME_SUFFIX, outcome)
    else:  # the command died meanwhile: nobody will read the files
        with contextlib.suppress(OSError):
            os.unlink(rec.prefix + TRACE_SUFFIX)


def _export(rec: Recording) -> JsonDict:
    path = rec.prefix + TRACE_SUFFIX
    t0 = time.perf_counter()
    try:
        create_private(path, b"")  # claimed, private, before torch's writer opens it
        rec.profile.export_chrome_trace(path)
        # torch's writer replaces the file with one of the process's umask: private again (the directory, the
        # board directory, is 0700 already: nobody else could open it meanwhile).
        os.chmod(path, 0o600, follow_symlinks=False)
        size = os.stat(path, follow_symlinks=False).st_size
    except Exception as exc:
        with contextlib.suppress(OSError):
            os.unlink(path)
        return {"error": f"exporting the trace failed: {type(exc).__name__}: {exc}"[:300],
                "export_ms": 1e3 * (time.perf_counter() - t0)}
    finally:
        rec.profile = None  # the recorded events are freed once written
    return {"export_ms": 1e3 * (time.perf_counter() - t0), "trace_bytes": size}


def thread_names() -> dict[str, str]:
    """Native thread id -> name: Python's names, and the kernel's (``comm``) for threads Python does not know
    (the autograd engine's, CUDA's, the profiler's own)."""
    names: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for tid in os.listdir("/proc/self/task")[:MAX_THREADS_NAMED]:
            with contextlib.suppress(OSError):
                with open(f"/proc/self/task/{tid}/comm", "rb") as fh:
                    names[tid] = fh.read(64).decode("utf-8", "replace").strip()
    for t in list(threading.enumerate())[:MAX_THREADS_NAMED]:
        if t.native_id is not None:
            names[str(t.native_id)] = t.name
        if t.ident is not None:
            # CUPTI names the thread of a CUDA call by pthread_self() cut to 32 bits; kineto maps it to the native id
            # only for threads whose CPU ops it records (a torch without profile_all_threads records none of them).
            names.setdefault(str(t.ident & 0xFFFFFFFF), t.name)
    return names


def _write_outcome(path: str, outcome: JsonDict) -> None:
    data = json.dumps(outcome, default=str, allow_nan=False).encode()
    with contextlib.suppress(OSError):
        write_private_atomic(path, data, tmp=path + TMP_SUFFIX)


def recording() -> JsonDict | None:
    """The recording in progress, for the hook inventory and tests (None when none runs)."""
    rec = _STATE["recording"]
    if rec is None:
        return None
    return {"started_mono_ns": rec.started_mono_ns, "steps": rec.steps(), "stopped": rec.stopped}
