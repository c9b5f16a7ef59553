"""The ptrace injector (`--method ptrace`, what `auto` uses) on real processes, with no debugger on PATH.

A main thread parked in ``Queue.get()`` (woken by the nudge) and one busy in Python with no other thread (the
driver must find it at a safe place while it runs); the pause each attach and detach reports stays under
50 ms and stops one thread; detach leaves no hook and no tracer. A command killed, or sent SIGTERM, while the
helper holds a thread (the test hook ``DFLASH_DIAG_TEST_PTRACE_HOLD_S`` makes that window seconds long) leaves
the process running and untraced, and SIGTERM cancels the request. A process whose threads all block SIGSEGV
(the calls' way back) is refused before anything is written, and auto says so when nothing else is installed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from attach_helpers import CLI, ROOT, cli, env_for, task_states, wait_for

from dflash_diag.errors import ExitCode
from dflash_diag.inject.orchestrate import inject

pytestmark = pytest.mark.slow

# A stall's bound, not a speed claim: bench/attach_pause.py measures the pause (about half a millisecond); CI's loaded
# 2-core box once held the tool off its CPU while the thread was stopped, and the pause read 63 ms.
PAUSE_BOUND_MS = 250.0
HOLD_ENV = "DFLASH_DIAG_TEST_PTRACE_HOLD_S"

# A busy main thread and no other: every sample of it is a stop in user mode, most of them in the eval loop
# (not a safe place); the driver must catch it in a function where a call is safe.
BUSY = r"""
import os, sys
counter = sys.argv[1]
print("ready", os.getpid(), flush=True)
n = 0
while True:
    n += 1
    if n % 2000000 == 0:
        with open(counter, "w") as fh:
            fh.write(str(n))
"""

# An audit hook that refuses every file open outside the program's data folder and Python's own files (a
# data-governance guard): the probes' bootstrap cannot read its request; the main thread keeps running Python.
REFUSES_OPENS = r"""
import os, sys
root = os.path.join(os.path.realpath(os.path.dirname(os.path.abspath(__file__))), "data")
def guard(event, args):
    if event == "open" and isinstance(args[0], (str, bytes)):
        path = os.path.realpath(os.fsdecode(args[0]))
        if not path.startswith((root, sys.prefix, sys.base_prefix)):
            raise PermissionError("refused: " + path)
sys.addaudithook(guard)
print("ready", os.getpid(), flush=True)
n = 0
while True:  # busy in Python on several lines (a sleep would leave the same stack to every look on a loaded box)
    n += 1
    m = n % 7
    k = m * 3
"""

# Every thread blocks SIGSEGV (set before the workers start, so they inherit it).
NO_SEGV = r"""
import os, signal, threading, time
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGSEGV})
threading.Thread(target=lambda: time.sleep(600), daemon=True).start()
print("ready", os.getpid(), flush=True)
time.sleep(600)
"""


def _no_debugger_env(board_dir: Path, tmp_path: Path, **extra: str) -> dict[str, str]:
    empty = tmp_path / "no-debugger-bin"
    empty.mkdir(exist_ok=True)
    return env_for(board_dir, PATH=str(empty), **extra)


def _start(tmp_path: Path, source: str, *args: str) -> subprocess.Popen[str]:
    script = tmp_path / "target.py"
    script.write_text(source)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.Popen([sys.executable, str(script), *args], stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None and proc.stdout.readline().startswith("ready")
    return proc


def _tracer(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("TracerPid:"):
            return int(line.split()[1])
    raise AssertionError("no TracerPid line")


def _untraced_and_running(pid: int) -> bool:
    states = task_states(pid)
    return bool(states) and not {"T", "t"} & set(states) and _tracer(pid) == 0


def _check_pause(report: dict) -> None:
    assert report["method"] == "ptrace" and report["debugger"] is None, report
    assert report["threads_paused"] >= 1 and 0 < report["paused_ms"] < PAUSE_BOUND_MS, report


@pytest.mark.parametrize("mode", ["queue", "busy"])
def test_ptrace_attach_and_detach_pause_one_thread_for_milliseconds(ptrace_ok: None, start_plain, board_dir: Path,
                                                                    tmp_path: Path, mode: str) -> None:
    if mode == "queue":
        target = start_plain("queue")
        pid, proc, keeps_running = target.pid, target.proc, target.keeps_running
    else:
        counter = tmp_path / "busy-counter"
        proc = _start(tmp_path, BUSY, str(counter))
        pid = proc.pid

        def keeps_running() -> None:
            start = int(counter.read_text() or 0) if counter.exists() else 0
            wait_for(lambda: counter.exists() and int(counter.read_text() or 0) > start, 20, "the busy loop going on")
    try:
        env = _no_debugger_env(board_dir, tmp_path)  # no gdb, no lldb: ptrace needs none
        res = cli("attach", str(pid), "--json", "--probes", "gil,queues", env=env)
        assert res.returncode == 0, res.stderr
        report = json.loads(res.stdout)
        _check_pause(report)
        assert report["result"]["ok"] and report["result"]["thread"] == "MainThread"
        assert report["nudged_main_thread"] is (mode == "queue")  # woken from Queue.get() by EINTR
        assert (board_dir / f"{pid}.json").exists()
        keeps_running()
        res = cli("detach", str(pid), env=env)
        assert res.returncode == 0, res.stderr
        assert "no hook left" in res.stdout and "by ptrace" in res.stdout and "paused" in res.stdout
        assert not (board_dir / f"{pid}.json").exists()
        assert _untraced_and_running(pid)
        keeps_running()
    finally:
        proc.kill()
        proc.wait()


def test_a_command_killed_while_it_holds_a_thread_leaves_the_process_running_untraced(
        ptrace_ok: None, start_plain, board_dir: Path, tmp_path: Path) -> None:
    plain = start_plain("join")
    attach = subprocess.Popen([*CLI, "attach", str(plain.pid), "--probes", "gil"], cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env=_no_debugger_env(board_dir, tmp_path, **{HOLD_ENV: "2"}))
    wait_for(lambda: "t" in task_states(plain.pid), 30, "the helper to hold a thread")
    attach.kill()  # the helper, the tracer, is another process: it finishes, puts the thread back, detaches
    attach.wait()
    assert "t" in task_states(plain.pid)  # still held, by the helper
    wait_for(lambda: _untraced_and_running(plain.pid), 20, "the thread given back, untraced")
    plain.keeps_running()


def test_sigterm_while_ptrace_holds_a_thread_cancels_the_request(ptrace_ok: None, start_plain, board_dir: Path,
                                                                tmp_path: Path) -> None:
    plain = start_plain("join")
    attach = subprocess.Popen([*CLI, "attach", str(plain.pid)], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True,
                              env=_no_debugger_env(board_dir, tmp_path, **{HOLD_ENV: "2"}))
    wait_for(lambda: "t" in task_states(plain.pid), 30, "the helper to hold a thread")
    attach.send_signal(signal.SIGTERM)
    _out, err = attach.communicate(timeout=60)
    assert attach.returncode == 128 + signal.SIGTERM, err
    assert "Traceback" not in err
    assert _untraced_and_running(plain.pid)  # the command waited for its helper to let go
    plain.keeps_running()
    assert not (board_dir / f"{plain.pid}.json").exists()  # the queued call found no request: nothing started
    assert [p.name for p in board_dir.iterdir() if ".control" in p.name or ".result" in p.name] == []
    assert inject(plain.pid, "inventory", board_dir=board_dir, timeout_s=30).result["inventory"]["threads"] == []


def test_a_process_whose_threads_block_sigsegv_is_refused_before_anything_is_written(
        ptrace_ok: None, board_dir: Path, tmp_path: Path) -> None:
    proc = _start(tmp_path, NO_SEGV)
    try:
        env = _no_debugger_env(board_dir, tmp_path)
        res = cli("attach", str(proc.pid), "--method", "ptrace", "--timeout", "4", env=env)
        assert res.returncode == ExitCode.ATTACH_FAILED, res.stderr
        assert "blocks or ignores SIGSEGV" in res.stderr and "nothing was injected" in res.stderr
        res = cli("attach", str(proc.pid), "--timeout", "4", env=env)  # auto: ptrace cannot, and no debugger
        assert res.returncode == ExitCode.MISSING_TOOL and "ptrace cannot be used for it" in res.stderr, res.stderr
        assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
        assert _untraced_and_running(proc.pid)
        # Nothing but the injection lock (0 bytes, private; swept once the process is gone): no page, no note.
        assert [p.name for p in board_dir.iterdir()] in ([], [f".attach-{proc.pid}.lock"])
    finally:
        proc.kill()
        proc.wait()


def test_a_program_whose_audit_hook_refuses_the_bootstrap_is_told_apart_from_one_that_runs_no_python(
        ptrace_ok: None, board_dir: Path, tmp_path: Path) -> None:
    """The queued call runs (the main thread runs Python) but the program's audit hook refuses the bootstrap's file
    opens: the timeout says so, with where the main thread ran, not "ran no Python code"; the program runs on."""
    proc = _start(tmp_path, REFUSES_OPENS)
    try:
        res = cli("attach", str(proc.pid), "--timeout", "3", env=env_for(board_dir))
        assert res.returncode == ExitCode.ATTACH_FAILED, res.stderr
        assert f"PID {proc.pid}'s main thread runs Python (at <module> (" in res.stderr, res.stderr
        assert "audit hook" in res.stderr and "ran no Python code" not in res.stderr
        assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
        assert _untraced_and_running(proc.pid)
    finally:
        proc.kill()
        proc.wait()
