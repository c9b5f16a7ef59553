"""Diagnostics that cost the threads that train: Python's logging, its warnings and stack inspection run on the
training thread's time. A process-wide setting usually decides how much (a logger or the root logger at DEBUG, a
handler that flushes to a slow stream, a warnings filter of ``always``, a library that captures a traceback per
call); the stacks show where the time goes, in the standard library's own modules, wherever the program calls them.

The cost is the share of a thread's samples inside that machinery, for a thread whose speed is the program's (it
trains, or its stage limits throughput): a logger thread that only writes records others queued is not a cost.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping

from dflash_contract.board import SettingsKeys
from dflash_contract.settings import AREA_DEBUG
from dflash_diag.analysis.findings._context import (
    Context,
    most_common_own_line,
    pct,
    rows_that_matter,
    speed_matters,
)
from dflash_diag.analysis.findings._registry import RuleSpec
from dflash_diag.analysis.settings import by_area, non_default, settings_payload
from dflash_diag.model import Finding, Frame, Severity, ThreadSample, ThreadState

RULES = (RuleSpec("diagnostics-overhead", sampled=True),)

# A thread that matters spends this share of its samples in the machinery: information from the first, a warning
# (its time is the program's) from the second.
INFO_SHARE = 0.05
WARNING_SHARE = 0.15
MIN_ROWS = 8  # samples of the thread, at least

# The standard library's diagnostics, by the path of their module (as py-spy reports it), and what each is.
# Warnings come first: shown through logging (logging.captureWarnings), a sample is in both, and a tie goes to the
# warnings that start it.
_MACHINERY: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Python's warnings", ("/warnings.py",)),
    ("Python's logging", ("/logging/__init__.py", "/logging/handlers.py", "torch/_logging/")),
    ("stack capture (traceback, inspect)", ("/traceback.py", "/inspect.py", "/linecache.py", "/tokenize.py")),
)
_STACK_CAPTURE = dict(_MACHINERY)["stack capture (traceback, inspect)"]
# The calls that capture a stack, and the words a line that calls one has.
_CAPTURE_ENTRIES = frozenset({"format_stack", "extract_stack", "print_stack", "stack", "getouterframes",
                              "walk_stack", "format_exc", "print_exc", "format_exception", "getframeinfo"})
_TORCH_OP_CODE = ("/torch/nn/", "/torch/_tensor.py", "/torch/functional.py")
_CAPTURE_CALLS = ("traceback", "format_stack", "extract_stack", "print_stack", "inspect", "stack(", "format_exc",
                  "print_exc", "getframeinfo", "_getframe")
# The machinery's own entry points and level or filter checks: a sample whose innermost frame of the machinery is
# one of these was only deciding whether to make a record; any other (making the record, formatting it, its
# handlers writing it, a warning shown, a stack walked) was doing the work.
_CHECKS = frozenset({"isEnabledFor", "getEffectiveLevel", "debug", "info", "warning", "warn", "error", "log",
                     "exception", "critical", "getLogger", "disable", "_is_internal_frame", "_next_external_frame"})


# The settings (read by the probe) said with each machinery: what lets the records or warnings through.
_SAID_WITH = {"Python's logging": ("logging.getLogger().level", "logging.getLogger(NAME).level"),
              "Python's warnings": ("warnings.filters",)}


def check(ctx: Context) -> Iterator[Finding]:
    yield from _machinery(ctx)
    yield from _timer_handlers(ctx)
    traced = list(_traced_threads(ctx))
    yield from traced or _hooks(ctx)


def _traced_threads(ctx: Context) -> Iterator[Finding]:
    """A thread that matters with a trace function on its frames, as the settings probe read it: every Python line
    it runs calls the function. Weighed by what the probe measured in this process (a simple line under an empty
    trace function against none) and the share of the thread's samples running Python (which holds the tracing:
    the interpreter's calls into the function are charged to the lines it traces): the part of that Python time
    the tracing takes, about (heavier lines pay a smaller part, a tracer that does more work a larger one)."""
    interp = settings_payload(ctx.obs.board).get(SettingsKeys.INTERPRETER)
    if not isinstance(interp, Mapping):
        return
    rows, slowdown = interp.get(SettingsKeys.THREAD_TRACERS), interp.get(SettingsKeys.TRACE_LINE_SLOWDOWN)
    if not isinstance(rows, list) or not isinstance(slowdown, int | float) or isinstance(slowdown, bool) \
            or slowdown <= 1.0:
        return
    hooks = {str(r[0]): str(r[1]) for r in rows if isinstance(r, list) and len(r) == 2}
    best: tuple[float, str, str, float, str] | None = None
    for stats in ctx.sampled():
        if stats.name not in hooks or stats.name.startswith("dflash-diag-") or \
                not speed_matters(ctx, stats.name, stats.stage.value):
            continue
        python = stats.shares.get(ThreadState.PYTHON, 0.0)
        cost = python * (1.0 - 1.0 / float(slowdown))
        if cost >= INFO_SHARE and (best is None or cost > best[0]):
            best = (cost, stats.name, hooks[stats.name], python, stats.stage.value)
    if best is None:
        return
    cost, name, hook, python, stage = best
    warning = cost >= HOOK_WARNING_SHARE
    yield Finding(
        rule_id="diagnostics-overhead", severity=Severity.WARNING if warning else Severity.INFO,
        claim=(f"{name} runs under a trace function ({hook}, on its frames: read by the settings probe): every Python "
               f"line it runs calls it; a line runs {float(slowdown):.1f}x slower under even an empty trace function "
               f"in this process, and {pct(python)} of {name}'s samples run Python: about {pct(cost)} of its time "
               "(sys.settrace, threading.settrace: a debugger, coverage, a watchdog or line profiler left on)"),
        evidence=((f"trace function of {name}", hook),
                  ("a Python line under an empty trace function", f"{float(slowdown):.1f}x slower (measured here)"),
                  (f"{name}'s samples running Python", pct(python))),
        remedy=("Remove the trace function from the training run: the debugger or coverage session, "
                "sys.settrace(None) / threading.settrace(None) once its work is done, or sample instead (py-spy, "
                "sys._current_frames() from a thread of its own) for a watchdog."),
        impact=cost if warning else 0.0, stages=(stage,) if stage != "other" else ())


def _machinery(ctx: Context) -> Iterator[Finding]:
    best: tuple[float, str, str, list[ThreadSample], str] | None = None
    for stats, rows in rows_that_matter(ctx, MIN_ROWS):
        # A stack a C extension captures (torch's anomaly mode) is torch-debug-mode's to weigh, not the program's.
        own = [t for t in rows if not stack_capture_from_native(ctx, t)]
        for what, paths in _MACHINERY:
            inside = [t for t in own if _inside(t, paths)]
            share = len(inside) / len(rows)
            if share >= INFO_SHARE and (best is None or share > best[0]):
                best = (share, stats.name, what, inside, stats.stage.value)
    if best is None:
        return
    share, name, what, inside, stage = best
    paths = dict(_MACHINERY)[what]
    site = most_common_own_line(ctx, inside)
    emits = sum(1 for t in inside if _working_frame(t, paths)) / len(inside)
    doing = ("records are made, formatted and written on it" if emits >= 0.5 else
             "mostly checking and filtering, few records written")
    settings = [r for r in by_area(non_default(ctx.obs), AREA_DEBUG) if r.name in _SAID_WITH.get(what, ())]
    logging_paths = dict(_MACHINERY)["Python's logging"]
    if what == "Python's warnings" and any(_inside(t, logging_paths) for t in inside):
        doing += " (shown through logging: logging.captureWarnings)"
    claim = (f"{name} spends {pct(share)} of its samples in {what}: {doing}"
             + (f", called from {site}" if site else "")
             + ("; " + ", ".join(f"{r.text()} (default {r.default})" for r in settings) if settings else ""))
    yield Finding(
        rule_id="diagnostics-overhead", severity=Severity.WARNING if share >= WARNING_SHARE else Severity.INFO,
        claim=claim,
        evidence=((f"{name}'s samples in {what}", f"{len(inside)} ({pct(share)})"),
                  ("making or writing records among them (not a level check)", pct(emits)),
                  ("called from", site or "?")),
        remedy=("Take it off the training thread's path: raise the level of the logger that lets these records "
                "through (a library's logging.basicConfig(level=DEBUG) sets the root logger for everyone), log "
                "every N steps, or hand records to a QueueHandler; show a warning once (the default filter, not "
                "'always'); capture stacks only when something failed."),
        impact=share if share >= WARNING_SHARE else 0.0,
        stages=(stage,) if stage != "other" else ())


def _timer_handlers(ctx: Context) -> Iterator[Finding]:
    """A repeating interval timer (the settings probe reads ``signal.getitimer``) whose Python handler runs in the
    main thread at every tick: weighed by the main thread's samples inside the handler, where that thread's speed is
    the program's. Seen with the probes only (from outside a handler's frames are ordinary Python)."""
    timers = [r for r in non_default(ctx.obs) if r.name.startswith("signal.setitimer(")]
    for reading in timers:
        handler = reading.value.rsplit("handler ", 1)[-1]
        if handler in ("default", "ignored", "native", "?"):
            continue
        for stats in ctx.sampled():
            rows = [thread for thread, _ in ctx.stats_rows(stats)]
            inside = [t for t in rows if any(not f.native and (handler == f.name or handler.endswith("." + f.name))
                                              for f in t.frames)]
            if len(rows) < MIN_ROWS or not inside or not speed_matters(ctx, stats.name, stats.stage.value):
                continue
            share = len(inside) / len(rows)
            if share < INFO_SHARE:
                continue
            stage = stats.stage.value
            yield Finding(
                rule_id="diagnostics-overhead", severity=Severity.WARNING if share >= WARNING_SHARE else Severity.INFO,
                claim=(f"{stats.name} spends {pct(share)} of its samples in {handler}, the handler of a repeating "
                       f"timer ({reading.text()}): it runs at every tick, between two of the thread's bytecodes"),
                evidence=((reading.text(), reading.detail or "read by the settings probe"),
                          (f"{stats.name}'s samples in the handler", f"{len(inside)} ({pct(share)})")),
                remedy=("Stop the timer once its work is done (signal.setitimer(timer, 0): a sampling profiler left "
                        "running, a watchdog), or give it a longer interval."),
                impact=share if share >= WARNING_SHARE else 0.0, stages=(stage,) if stage != "other" else ())
            return


# A hook runs at many lines that do not call it: seen under this many distinct lines of the thread.
HOOK_CALLERS = 4
HOOK_FUNCTIONS = 3  # ... of this many functions
HOOK_IMPLICIT_PART = 0.8  # ... and this part of its samples under a caller that was read, none calling it
# A hook's own samples are a lower bound of what it costs (the interpreter's calls into it are charged to the lines
# it runs under): a warning from this share.
HOOK_WARNING_SHARE = 0.08


def _hooks(ctx: Context) -> Iterator[Finding]:
    """A Python function that runs at many lines none of which calls it, on a thread that matters: a trace or
    profile function (``sys.settrace``, ``sys.setprofile``, ``threading.settrace``: coverage, a debugger, a line
    profiler left on) or an audit hook. Read off the stacks in every mode: the function is the innermost Python
    frame, the frame outward of it is at a line whose text does not name it, and those lines are many."""
    best: tuple[float, str, Frame, list[ThreadSample], set[Frame], str] | None = None
    for stats, rows in rows_that_matter(ctx, MIN_ROWS):
        by_hook: dict[tuple[str, str], list[tuple[ThreadSample, Frame, Frame]]] = {}
        called_at: Counter[tuple[str, str]] = Counter()  # samples of each function at a line that calls it
        for t in rows:
            implicit, explicit = _implicit_call(ctx, t)
            if implicit is not None:
                by_hook.setdefault((implicit[0].filename, implicit[0].name), []).append((t, *implicit))
            if explicit is not None:
                called_at[(explicit.filename, explicit.name)] += 1
        for key, found in by_hook.items():
            callers = {caller for _, _, caller in found}
            share = len(found) / len(rows)
            # A stack read while the thread moves can pair a function with a line it has just left: a hook is
            # (almost) never under a line that calls it, and runs under lines of several functions.
            never_called = len(found) >= HOOK_IMPLICIT_PART * (len(found) + called_at[key])
            if len(callers) >= HOOK_CALLERS and len({c.name for c in callers}) >= HOOK_FUNCTIONS and never_called \
                    and share >= INFO_SHARE and (best is None or share > best[0]):
                best = (share, stats.name, found[0][1], [t for t, _, _ in found], callers, stats.stage.value)
    if best is None:
        return
    share, name, hook, inside, callers, stage = best
    functions = {c.name for c in callers}
    # The probe's reading of the trace and profile functions, where it ran: what installed it, by name.
    read = [r for r in by_area(non_default(ctx.obs), AREA_DEBUG)
            if r.name.startswith(("a trace function", "a profile function", "trace function of thread"))]
    claim = (f"{name} spends {pct(share)} of its samples in {hook.name} ({hook.short_filename}:{hook.line}), a "
             f"function none of its callers' lines calls: it runs at {len(callers)} different lines of "
             f"{len(functions)} function{'s' if len(functions) != 1 else ''}, as a trace or profile hook does "
             "(sys.settrace, sys.setprofile or threading.settrace: coverage, a debugger or a line profiler left on; "
             "or an audit hook), and every line or call of the thread pays for it (its samples are the least "
             "of that: calling it is charged to the lines it runs under)"
             + ("; " + ", ".join(f"{r.name}: {r.value}" for r in read[:2]) if read else ""))
    warning = share >= HOOK_WARNING_SHARE
    yield Finding(
        rule_id="diagnostics-overhead", severity=Severity.WARNING if warning else Severity.INFO,
        claim=claim,
        evidence=((f"{name}'s samples in {hook.name}", f"{len(inside)} ({pct(share)})"),
                  ("lines it runs under (none calls it)", ", ".join(sorted(f"{c.short_filename}:{c.line}"
                                                                          for c in callers)[:6])),),
        remedy=("Remove the hook from the training run: the coverage or debugger session, sys.settrace(None) / "
                "threading.settrace(None) once its work is done, or a sampling profiler (py-spy) instead of a "
                "tracing one."),
        impact=share if warning else 0.0, stages=(stage,) if stage != "other" else ())


def _implicit_call(ctx: Context, thread: ThreadSample) -> tuple[tuple[Frame, Frame] | None, Frame | None]:
    """((the innermost Python frame, its caller), None) where the caller's line was read and does not name the
    function: Python ran it without a call at that line; (None, the innermost frame) where the line calls it.
    Comprehensions, generators resumed by a loop and dunder methods (an operator, ``with``, indexing) run without
    a call too, by syntax, and are not hooks."""
    python = [f for f in thread.frames if not f.native]
    if len(python) < 2:
        return None, None
    inner, caller = python[0], python[1]
    short = inner.name.rsplit(".", 1)[-1]
    if short.startswith("<") or short.startswith("__") or inner.filename == caller.filename and inner.name == \
            caller.name:
        return None, None
    text = ctx.line_text(caller)
    if not text:
        return None, None
    return (None, inner) if short in text else ((inner, caller), None)


def _inside(thread: ThreadSample, paths: tuple[str, ...]) -> bool:
    return any(not f.native and any(p in f.filename for p in paths) for f in thread.frames)


def stack_capture_from_native(ctx: Context, thread: ThreadSample) -> bool:
    """The sample is inside a Python stack capture (``traceback.format_stack``...) that no Python line called: the
    frame outward of it is at a line that does not call one, so native code did (torch's anomaly detection stores a
    Python stack for every op it records, from C++)."""
    frames = [f for f in thread.frames if not f.native]
    inner = [i for i, f in enumerate(frames) if any(p in f.filename for p in _STACK_CAPTURE)]
    if not inner:
        return False
    outer = max(inner)
    if frames[outer].name not in _CAPTURE_ENTRIES or outer + 1 >= len(frames):
        return False
    caller = frames[outer + 1]
    text = ctx.line_text(caller)
    if text is None:
        # A library line not read: torch's module code calls ops, never a stack capture.
        return any(m in caller.filename for m in _TORCH_OP_CODE)
    return not any(call in text for call in _CAPTURE_CALLS)


def _working_frame(thread: ThreadSample, paths: tuple[str, ...]) -> bool:
    """The innermost frame of the machinery in this sample does the work (not a level or filter check)."""
    frame = next((f for f in thread.frames if not f.native and any(p in f.filename for p in paths)), None)
    return frame is not None and frame.name not in _CHECKS
