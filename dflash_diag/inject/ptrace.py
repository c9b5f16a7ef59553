"""``--method ptrace``: this command's own injector, no debugger needed (x86-64 Linux).

The plan (addresses from the target's ELF files, the program, where a call is safe) goes to the driver,
``inject/ptrace_driver.py``, run in a helper process: ``python -I -S`` (nothing of the environment changes it),
its own session (a Ctrl-C in the terminal does not reach it) and SIGINT/SIGTERM/SIGHUP ignored. The helper is
the tracer: if the command dies, the helper still finishes, puts the thread back and detaches (all its waits are
bounded). One thread of the process is stopped, for about a millisecond; the others run on.

Why not ``pyinjector`` (kubo/injector): it loads a shared library by calling ``dlopen`` in the stopped thread,
which takes malloc's and the loader's locks (a thread stopped inside malloc deadlocks the process, its own
README says so), writes code at libc's entry point, and leaves the library loaded for good; we would also have
to build and ship that library for every platform. Queuing a pending call needs two calls (``mmap``, a system-call
wrapper, and ``Py_AddPendingCall``) and no code of ours in the process.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

from dflash_diag.errors import AttachError, ExitCode
from dflash_diag.inject.injection import CALL_GRACE_S, Run, left_s
from dflash_diag.inject.nudge import LOCK_WAIT_FUNCS
from dflash_diag.inject.preflight import blocked_in, syscall_name
from dflash_diag.inject.program import page_words
from dflash_diag.inject.request import note_page, remove_quietly, reusable_page
from dflash_diag.sources.elfsyms import ProcessSymbols, parse_maps
from dflash_diag.sources.ptrace_access import not_permitted

SEARCH_S = 2.0  # how long the driver looks for a thread stopped at a safe place
CALL_TIMEOUT_S = 2.0  # one call into the process (microseconds when all is well)
STOP_TIMEOUT_S = 0.5  # a thread that does not stop in that long sits in an uninterruptible wait: the next one
HELPER_START_S = 10.0  # an interpreter's start-up on a loaded machine, with room
TEST_HOLD_ENV = "DFLASH_DIAG_TEST_PTRACE_HOLD_S"  # tests only: hold the thread that long before the calls (<= 5 s)
# Exported functions in which a running thread may hold the interpreter's pending-calls lock (or be about to
# take it: the eval loop handles pending calls inline), or that belong to the lock and thread machinery: a thread
# stopped there is not used (one stopped in a system call always may be).
UNSAFE_NAMES = re.compile(r"(?i)pending|lock|mutex|semaphore|parkinglot|eval|signal|gil|thread|tstate|interp|"
                          r"runtime|finaliz|fork|atexit|exit")
HELPER = ("import sys; sys.path.insert(0, sys.argv[1]); "
          "from dflash_diag.inject.ptrace_driver import main; sys.exit(main())")


class PtraceUnavailable(AttachError):
    """ptrace cannot be used here, and nothing was done to the process: ``auto`` tries the next method."""


def safe_ranges(symbols: ProcessSymbols) -> list[int]:
    """[start, end, start, end, ...] of the exported Python-runtime functions a running thread may be stopped in."""
    out: list[int] = []
    for start, end, name in symbols.functions:
        if not UNSAFE_NAMES.search(name):
            out += [start, end]
    return out


def lock_wait_ranges(symbols: ProcessSymbols) -> list[list[Any]]:
    return [[start, end, name] for start, end, name in symbols.functions if name in LOCK_WAIT_FUNCS]


def text_ranges(maps_text: str, path: str) -> list[int]:
    """Where the Python runtime's code is mapped (its executable mappings), as a flat sorted list."""
    spans = sorted((m.start, m.end) for m in parse_maps(maps_text) if m.path == path and "x" in m.perms)
    return [v for span in spans for v in span]


def plan_for(run: Run, program: str) -> dict[str, Any]:
    target = run.target
    symbols = target.symbols
    if symbols is None:
        raise PtraceUnavailable(f"the ptrace injector needs the runtime's symbols from its ELF files: "
                                f"{target.symbols_note or 'not found'}", ExitCode.UNSUPPORTED)
    try:
        with open(f"/proc/{target.pid}/maps", "rb") as fh:
            maps = fh.read(16 << 20).decode("utf-8", "replace")
    except OSError:
        raise AttachError(f"no process with PID {target.pid} is running", ExitCode.NO_PROCESS) from None
    data = b"".join(word.to_bytes(8, "little") for _, word in page_words(program))
    search_s = min(SEARCH_S, max(0.2, left_s(run) / 4))
    hold_s = _test_hold_s()
    return {
        "pid": target.pid, "mmap": symbols.addresses["mmap"], "add_pending_call": symbols.addresses["Py_AddPendingCall"],
        "run_simple_string": symbols.addresses["PyRun_SimpleString"],
        "page": reusable_page(run.req.directory, target.pid, target.start_ticks), "program_hex": data.hex(),
        "allowed": safe_ranges(symbols), "py_text": text_ranges(maps, symbols.python_file),
        "lock_waits": lock_wait_ranges(symbols), "search_s": search_s, "call_timeout_s": CALL_TIMEOUT_S,
        "stop_timeout_s": STOP_TIMEOUT_S, "hold_s": hold_s,
    }


def _test_hold_s() -> float:
    try:
        return min(5.0, max(0.0, float(os.environ.get(TEST_HOLD_ENV, "0") or 0)))
    except ValueError:
        return 0.0


def helper_argv(python: str) -> list[str]:
    root = str(Path(__file__).resolve().parents[2])  # the directory that holds dflash_diag
    return [python, "-I", "-S", "-c", HELPER, root]


def via_ptrace(run: Run, program: str) -> None:
    plan = plan_for(run, program)
    budget_s = HELPER_START_S + plan["search_s"] + 2 * (CALL_TIMEOUT_S + 5.0) + plan["hold_s"]
    helper = subprocess.Popen(helper_argv(run.path), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, start_new_session=True, env={"PATH": os.environ.get("PATH", "")})
    try:
        out, err = helper.communicate(json.dumps(plan).encode(), timeout=budget_s)
    except subprocess.TimeoutExpired:
        # Its every wait is bounded: one that ran past all of them is stuck; killing it is all that is left.
        helper.kill()
        helper.wait()
        raise AttachError(f"the ptrace helper did not finish in {budget_s:g} s; PID {run.target.pid} was left to "
                          "the kernel's detach", ExitCode.ATTACH_FAILED) from None
    except BaseException:  # Ctrl-C, SIGTERM: the helper finishes its bounded work and lets go; wait for that
        # Cancel first: the call it may still queue then finds no request to claim, and does nothing.
        remove_quietly([run.req.control])
        try:
            helper.wait(timeout=budget_s + CALL_GRACE_S)
        except subprocess.TimeoutExpired:
            helper.kill()
        raise
    report = _report(out, err, helper.returncode)
    run.transcript.append("ptrace driver: " + json.dumps({k: v for k, v in report.items() if k != "skipped"}))
    _account(run, report)
    if report.get("ok"):
        note_page(run.req.directory, run.target.pid, run.target.start_ticks, int(report["page"]))
        return
    raise _error(run, report)


def _report(out: bytes, err: bytes, status: int | None) -> dict[str, Any]:
    lines = out.decode("utf-8", "replace").strip().splitlines()
    try:
        value = json.loads(lines[-1]) if lines else None
    except ValueError:
        value = None
    if not isinstance(value, dict):
        said = err.decode("utf-8", "replace").strip().splitlines()
        return {"ok": False, "kind": "failed", "touched": True,
                "error": f"the ptrace helper gave no answer (status {status}): {said[-1][:200] if said else 'no output'}"}
    return value


def _account(run: Run, report: dict[str, Any]) -> None:
    """The pause of each thread, the nudge and where the main thread was, onto the run."""
    pauses = [float(v) for v in (report.get("pauses_us") or {}).values()]
    run.paused_s = max(pauses) / 1e6 if pauses else None
    run.threads_paused = len(pauses)
    run.stops = int(report.get("samples") or 0)
    run.paused_total_s = sum(float(v) for v in (report.get("stopped_us") or {}).values()) / 1e6
    run.stopped_s = run.paused_s
    run.nudged = bool(report.get("nudged"))
    if report.get("main_thread"):
        syscall = report.get("syscall")
        where = [syscall_name(int(syscall))] if isinstance(syscall, int) else ["the Python runtime"]
        run.main_thread_where = " < ".join(where + list(report.get("where") or []))
    else:
        run.main_thread_where = blocked_in(run.target.pid)


def _error(run: Run, report: dict[str, Any]) -> AttachError:
    pid = run.target.pid
    kind, why = report.get("kind"), str(report.get("error") or "failed")
    if kind == "permission":
        return AttachError(not_permitted(pid), ExitCode.PERMISSION)
    if kind == "gone":
        return AttachError(f"no process with PID {pid} is running ({why})", ExitCode.NO_PROCESS)
    if not report.get("touched") and kind in ("no-safe-thread", "unsupported"):
        return PtraceUnavailable(f"{why}; PID {pid} runs on unchanged: nothing was injected", ExitCode.ATTACH_FAILED)
    tail = "" if report.get("touched") else "; nothing was injected"
    return AttachError(f"ptrace injection into PID {pid} failed: {why}{tail}", ExitCode.ATTACH_FAILED)
