"""Start (or stop) the probes inside a running CPython process from outside: `dflash-diag attach` / `detach`.

The steps (docs/attach.md has the whole story): pre-flight from /proc (``preflight``), the method
(``method``), a private control file in the board directory (``request``), the fixed program (``program``)
queued at a safe point of the interpreter by one method (``ptrace``, ``gdb``, ``lldb``, ``remote_exec``; ``auto``
goes on to the next when ptrace cannot be used and did nothing to the process),
then the bootstrap's answer, waited for with a timeout. On timeout the control file is deleted first: a late
pending call finds nothing to claim and does nothing.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dflash_diag import __version__
from dflash_diag.errors import AttachError, ExitCode
from dflash_diag.inject.gdb import via_gdb
from dflash_diag.inject.injection import CLAIMED_GRACE_S, DEFAULT_TIMEOUT_S, Outcome, Run
from dflash_diag.inject.lldb import via_lldb
from dflash_diag.inject.method import (
    DEBUGGERS,
    choose_method,
    find_debugger,
    ptrace_helper,
    remote_exec_helper,
)
from dflash_diag.inject.preflight import preflight, proc_state
from dflash_diag.inject.program import fixed_program
from dflash_diag.inject.ptrace import PtraceUnavailable, via_ptrace
from dflash_diag.inject.remote_exec import via_remote_exec
from dflash_diag.inject.request import (
    Lease,
    Request,
    clean_stale,
    control_document,
    forget_page,
    in_flight_error,
    injection_in_flight,
    injection_lock,
    mark_page_done,
    read_result,
    remove_quietly,
    write_private,
)
from dflash_diag.model import Frame, StackSample
from dflash_diag.sources.pyspy import PySpy


def package_paths() -> tuple[str, str]:
    """(package root, bootstrap file) of the installed probes package this command injects.

    Found with ``find_spec`` and its version read from the source: this command never imports the probes."""
    import importlib.util

    spec = importlib.util.find_spec("probes")
    if spec is None or not spec.origin or not spec.submodule_search_locations:
        raise AttachError("the probes package is not installed next to dflash-diag: reinstall it", ExitCode.FAILURE)
    pkg = Path(spec.origin).resolve().parent
    boot = pkg / "_attach_boot.py"
    contract = pkg.parent / "dflash_contract" / "attach.py"  # the bootstrap loads the protocol from beside it
    for needed in (boot, contract):
        if not needed.is_file():
            raise AttachError(f"probe bootstrap missing at {needed}: reinstall dflash-diag", ExitCode.FAILURE)
    m = re.search(r'^__version__ = "([^"]+)"', Path(spec.origin).read_text(encoding="utf-8"), re.M)
    declared = m.group(1) if m else None
    if declared != __version__:
        raise AttachError(f"the probes package ({declared}) and dflash-diag ({__version__}) differ: reinstall",
                          ExitCode.FAILURE)
    return str(pkg.parent), str(boot)


def inject(pid: int, action: str, *, names: Sequence[str] = (), board_dir: Path, method: str = "auto",
           timeout_s: float = DEFAULT_TIMEOUT_S, progress: Callable[[str], None] | None = None,
           environ: Mapping[str, str] | None = None, transcript: list[str] | None = None,
           lease: Lease | None = None, request: Request | None = None,
           kernels: Mapping[str, Any] | None = None) -> Outcome:
    """Run ``action`` inside ``pid`` and return its answer; AttachError (one line, exit code) otherwise.

    ``transcript`` (optional) receives the debugger session as it goes, also when the injection fails.
    ``lease``: see :class:`Lease`. ``request``: the request to use (its nonce names the files a kernel recording
    leaves; default a new one in ``board_dir``); ``kernels``: the parameters of the ``kernels`` action.
    Nothing waits past ``timeout_s`` but the graces of the module docstring."""
    t0 = time.monotonic()
    say = progress or (lambda _msg: None)
    try:
        target = preflight(pid)
    except AttachError:
        if injection_in_flight(board_dir, pid):  # the tracer preflight found is another attach of ours, mid-way
            raise in_flight_error(pid) from None
        raise
    found: dict[str, str | None] = {name: find_debugger(name, environ) for name in DEBUGGERS}
    found["remote-exec"] = remote_exec_helper(target)
    found["ptrace"] = ptrace_helper()
    chosen, path = choose_method(method, target.python, found)
    package_root, boot = package_paths()
    clean_stale(board_dir)
    run = Run(target=target, req=request or Request(board_dir, pid), method=chosen, path=path, timeout_s=timeout_s,
              deadline_mono=t0 + timeout_s, transcript=transcript if transcript is not None else [])
    deadline_wall_s = time.time() + timeout_s - (time.monotonic() - t0)
    doc = control_document(run.req, action, names, str(board_dir), deadline_wall_s, chosen, package_root, lease,
                           kernels)
    program = fixed_program(boot, str(run.req.control))
    with injection_lock(board_dir, pid):
        return _inject_locked(run, program, doc, method, found, say, t0, action)


def _inject_locked(run: Run, program: str, doc: Mapping[str, Any], method: str, found: dict[str, str | None],
                   say: Callable[[str], None], t0: float, action: str) -> Outcome:
    target, pid = run.target, run.target.pid
    try:
        write_private(run.req.control, json.dumps(doc).encode())
        while True:
            say(f"{run.method}: attaching to PID {pid}")
            try:
                _queue(run, program)
                break
            except PtraceUnavailable as exc:  # nothing was done to the process: the next method, under auto
                if method != "auto":
                    raise
                run.transcript.append(f"ptrace: {exc}; trying the next method")
                run.method, run.path = choose_method("auto", target.python, found, skip={"ptrace"})
        queued_at = time.monotonic()
        say("waiting for the process to reach a safe point")
        result = _wait_for_result(run)
    finally:
        remove_quietly(run.req.paths())
    python = run.python_version or target.version or str(result.get("python") or target.python_label)
    debugger = run.path if run.method in ("gdb", "cuda-gdb", "lldb") else None
    return Outcome(pid=pid, action=action, method=run.method, debugger=debugger, python=python,
                   stopped_s=run.stopped_s, waited_s=time.monotonic() - queued_at, total_s=time.monotonic() - t0,
                   nudged=run.nudged, result=result, transcript=tuple(run.transcript), paused_s=run.paused_s,
                   threads_paused=run.threads_paused, stops=run.stops, paused_total_s=run.paused_total_s)


def _queue(run: Run, program: str) -> None:
    """Make the process queue the fixed program, by ``run.method``."""
    if run.method == "ptrace":
        via_ptrace(run, program)  # it measures the pause of each thread it stopped
        return
    if run.method == "remote-exec":
        write_private(run.req.script, program.encode())
        via_remote_exec(run)
        run.paused_s, run.threads_paused = 0.0, 0  # sys.remote_exec writes into the process; nothing stops
        return
    threads = thread_count(run.target.pid)  # a debugger stops them all (all-stop mode), for as long as it holds
    try:
        (via_lldb if run.method == "lldb" else via_gdb)(run, program)
    finally:
        run.paused_s, run.threads_paused = run.stopped_s, threads if run.stopped_s is not None else None


# Looks at the main thread this far apart, at most this many: a stack that moved between two is running bytecode.
RUNS_PYTHON_GAP_S = 0.15
RUNS_PYTHON_LOOKS = 4


def main_thread_runs_python(pid: int, *, dump: Callable[[], StackSample] | None = None,
                            gap_s: float = RUNS_PYTHON_GAP_S) -> str:
    """Whether the main thread executes Python: non-blocking py-spy dumps ``gap_s`` apart (up to
    ``RUNS_PYTHON_LOOKS``) whose main-thread Python stacks differ ("at main (train.py:84), then main
    (train.py:90)"); "" when none differs, or it could not be read (a thread in one long C call shows the same
    stack every time: no claim is made about it)."""
    read = dump or PySpy(pid, retries=1, timeout_s=5.0).dump
    first: tuple[Frame, ...] | None = None
    try:
        for i in range(RUNS_PYTHON_LOOKS):
            if i:
                time.sleep(gap_s)
            sample = read()
            main = next((t for t in sample.threads if t.os_thread_id == pid or t.name == "MainThread"), None)
            stack = tuple(f for f in main.frames if not f.native) if main is not None else ()
            if not stack:
                return ""
            if first is None:
                first = stack
            elif stack != first:
                return f"at {_site_of(first[0])}, then {_site_of(stack[0])}"
    except (AttachError, OSError):
        return ""
    return ""


def _site_of(frame: Frame) -> str:
    return f"{frame.name} ({frame.short_filename}:{frame.line})"


def thread_count(pid: int) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return None


def _wait_for_result(run: Run) -> dict[str, Any]:
    pid = run.target.pid
    req = run.req
    deadline = run.deadline_mono
    while True:
        result = read_result(req.result, req.nonce)
        if result is not None:
            mark_page_done(req.directory, pid)
            return result
        if proc_state(pid) in (None, "Z", "X"):
            raise AttachError(f"PID {pid} exited before the probes started", ExitCode.NO_PROCESS)
        if time.monotonic() >= deadline:
            break
        time.sleep(0.02)
    # Cancel first: if the control file is still there, the bootstrap has not claimed it and never will.
    try:
        os.unlink(req.control)
    except FileNotFoundError:
        claimed_grace = time.monotonic() + CLAIMED_GRACE_S  # claimed just now: it is running, give it a moment
        while time.monotonic() < claimed_grace:
            result = read_result(req.result, req.nonce)
            if result is not None:
                mark_page_done(req.directory, pid)
                return result
            time.sleep(0.05)
        raise AttachError(f"the probes' bootstrap started in PID {pid} but gave no answer in {run.timeout_s + CLAIMED_GRACE_S:g} s; "
                          f"`dflash-diag board {pid}` shows whether the probes run", ExitCode.ATTACH_TIMEOUT) from None
    forget_page(req.directory, pid)  # the queued call still points at that page: never reuse it
    moving = main_thread_runs_python(pid)
    if moving:
        # The queued call runs at the interpreter's next check, which a thread running bytecode reaches within
        # milliseconds: it ran, and something in the process stopped the bootstrap before it could take the request.
        raise AttachError(
            f"PID {pid}'s main thread runs Python ({moving}), but the probes' bootstrap never took the "
            f"request in {run.timeout_s:g} s: something in the process stopped it before it could read its files "
            "(an audit hook, sys.addaudithook, or a sandbox that refuses file opens outside its paths does this); the "
            "request is cancelled: nothing was started. Start the program under `dflash-diag run` with "
            "DFLASH_DIAG_BOARD_DIR set to a directory it may open, or diagnose it from outside (`dflash-diag doctor "
            f"{pid}`)", ExitCode.ATTACH_FAILED)
    where = f" (main thread in {run.main_thread_where})" if run.main_thread_where else ""
    raise AttachError(
        f"PID {pid} did not reach a safe point in {run.timeout_s:g} s: its main thread ran no Python code{where}; "
        "the request is cancelled: nothing was started, and nothing will be when it runs Python again. Retry when "
        "it is busy in Python, or with a longer --timeout",
        ExitCode.ATTACH_TIMEOUT)
