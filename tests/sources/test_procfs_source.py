"""/proc readings of the live test process, and the parser on odd or malformed input."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import threading

import pytest

from dflash_diag.errors import AttachError, ExitCode
from dflash_diag.model import NA
from dflash_diag.sources import procfs


def test_read_threads_sees_a_named_busy_thread() -> None:
    started = threading.Event()
    stop = threading.Event()
    tid: list[int] = []

    def spin() -> None:
        tid.append(threading.get_native_id())
        # The kernel name (comm) is what /proc shows; set it the way a trainer would (PR_SET_NAME).
        libc = ctypes.CDLL(None)
        libc.prctl(15, b"target-0", 0, 0, 0)
        started.set()
        x = 0
        while not stop.is_set():
            x += 1

    t = threading.Thread(target=spin, name="target-0", daemon=True)
    t.start()
    try:
        assert started.wait(30)
        first = {p.tid: p for p in procfs.read_threads(os.getpid())}
        stop.wait(0.3)
        second = {p.tid: p for p in procfs.read_threads(os.getpid())}
    finally:
        stop.set()
        t.join(30)
    assert os.getpid() in first  # the main thread's TID is the PID
    me = second[tid[0]]
    assert me.comm == "target-0"
    assert me.state in "RSD"
    assert me.run_ns > first[tid[0]].run_ns  # it was running
    assert me.monotonic_s > first[tid[0]].monotonic_s
    assert me.utime_s >= 0 and me.runq_wait_ns >= 0


def test_vanished_threads_are_skipped() -> None:
    assert procfs.read_thread(os.getpid(), 2**22 + 12345) is None


def test_missing_process_raises_no_process() -> None:
    proc = subprocess.Popen(["true"])
    proc.wait()
    for call in (procfs.read_threads, procfs.read_cmdline, procfs.read_environ, procfs.process_start_ticks):
        with pytest.raises(AttachError) as err:
            call(proc.pid)
        assert err.value.exit_code == ExitCode.NO_PROCESS
    assert not procfs.process_alive(proc.pid)


def test_cmdline_environ_start_ticks() -> None:
    code = "import time; print('go', flush=True); time.sleep(30)"
    child = subprocess.Popen([sys.executable, "-c", code, "--token=abc"], stdout=subprocess.PIPE, text=True,
                             env={"PATH": "/usr/bin", "SECRET_KEY": "s3cr3t"})
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "go"  # exec'd and running
        assert procfs.read_cmdline(child.pid) == (sys.executable, "-c", code, "--token=abc")
        env = procfs.read_environ(child.pid)
        assert not isinstance(env, NA)
        assert env["PATH"] == "/usr/bin" and env["SECRET_KEY"] == "s3cr3t"  # raw: redaction is the caller's job
        ticks = procfs.process_start_ticks(child.pid)
        assert ticks > 0 and ticks == procfs.process_start_ticks(child.pid)
        assert procfs.process_alive(child.pid, ticks)
        assert not procfs.process_alive(child.pid, ticks + 1)  # a reused PID is another process
    finally:
        child.kill()
        child.wait()
        child.stdout.close()  # type: ignore[union-attr]


def test_parse_stat_handles_parentheses_in_comm() -> None:
    line = "123 (we ird) name)) S 1 1 1 0 -1 4194304 0 0 0 0 250 30 0 0 20 0 1 0 998877 0 0"
    comm, state, utime, stime, start = procfs.parse_stat(line)
    assert (comm, state, utime, stime, start) == ("we ird) name)", "S", 250, 30, 998877)


@pytest.mark.parametrize(
    "line",
    [
        "",
        "123 no-parens S 1",
        "123 (x) S 1 2",
        "123 (x) Q 1 1 1 0 -1 0 0 0 0 0 250 30 0 0 20 0 1 0 998877",
        "123 (x) S 1 1 1 0 -1 0 0 0 0 0 ab 30 0 0 20 0 1 0 998877",
        "123 (x) S 1 1 1 0 -1 0 0 0 0 0 -5 30 0 0 20 0 1 0 998877",
    ],
)
def test_parse_stat_rejects_malformed(line: str) -> None:
    with pytest.raises(procfs.ProcParseError):
        procfs.parse_stat(line)


def test_parse_schedstat() -> None:
    assert procfs.parse_schedstat("58327 1200 3\n") == (58327, 1200)
    for bad in ("", "1", "a b c", "-1 0 0"):
        with pytest.raises(procfs.ProcParseError):
            procfs.parse_schedstat(bad)
