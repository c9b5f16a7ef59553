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


def test_blocked_threads_show_where_the_kernel_parks_them() -> None:
    """A thread in a socket read and one in time.sleep: /proc names the wait (wchan) and the system call."""
    import socket
    import time

    a, b = socket.socketpair()
    ready = threading.Barrier(3)
    tids: dict[str, int] = {}

    def reader() -> None:
        tids["reader"] = threading.get_native_id()
        ready.wait()
        a.recv(1)

    def sleeper() -> None:
        tids["sleeper"] = threading.get_native_id()
        ready.wait()
        time.sleep(3)

    threads = [threading.Thread(target=f, daemon=True) for f in (reader, sleeper)]
    for t in threads:
        t.start()
    ready.wait()
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            by = {p.tid: p for p in procfs.read_threads(os.getpid())}
            r, s = by.get(tids["reader"]), by.get(tids["sleeper"])
            if r and s and r.state == "S" and s.state == "S" and r.wchan and s.wchan:
                break
            time.sleep(0.05)
        assert r is not None and s is not None
        assert r.wchan is not None and ("unix" in r.wchan or "sk_wait" in r.wchan or "wait" in r.wchan), r
        assert s.wchan is not None and "sleep" in s.wchan, s
        if r.syscall is not None:  # needs ptrace permission on the thread: ours here
            assert r.syscall in ("recvfrom", "read", "recvmsg"), r
            assert s.syscall in ("clock_nanosleep", "nanosleep", "select"), s
    finally:
        b.send(b"x")
        for t in threads:
            t.join(5)
        a.close()
        b.close()


def test_wchan_and_syscall_parsing() -> None:
    assert procfs.parse_wchan("futex_wait_queue\n") == "futex_wait_queue"
    assert procfs.parse_wchan("0") is None  # running, or hidden by the kernel
    assert procfs.parse_wchan("<weird> text") is None
    table = {202: "futex"}
    assert procfs.parse_syscall("202 0x7f 0x189 0x0 0x0 0x0 0x0 0x7ffd 0x7f12", table) == "futex"
    assert procfs.parse_syscall("999 0x0 0x0", table) == "syscall 999"
    assert procfs.parse_syscall("running", table) is None
    assert procfs.parse_syscall("-1 0x7ffd 0x7f12", table) is None
    assert procfs.parse_syscall("", table) is None
    # The tables name the kernel's own work too (a write, a sync), on both architectures, not only waits.
    for arch, numbers in (("x86_64", {1: "write", 74: "fsync", 75: "fdatasync", 73: "flock", 257: "openat"}),
                          ("aarch64", {64: "write", 82: "fsync", 83: "fdatasync", 32: "flock", 56: "openat"})):
        for number, name in numbers.items():
            assert procfs.parse_syscall(f"{number} 0x3 0x0", procfs._SYSCALLS[arch]) == name, (arch, number)


def test_idle_cores_from_proc_stat() -> None:
    before = "cpu  10 0 10 80 0 0 0 0 0 0\ncpu0 5 0 5 40 0 0 0 0 0 0\ncpu1 5 0 5 40 0 0 0 0 0 0\nintr 1\n"
    # 100 more ticks on each CPU: cpu0 fully busy, cpu1 90% idle (10 of it iowait)
    after = "cpu  0 0 0 0 0 0 0 0 0 0\ncpu0 105 0 5 40 0 0 0 0 0 0\ncpu1 15 0 5 120 10 0 0 0 0 0\n"
    a = procfs.CpuTimes(*procfs.parse_proc_stat(before), monotonic_s=0.0)
    b = procfs.CpuTimes(*procfs.parse_proc_stat(after), monotonic_s=1.0)
    assert procfs.idle_cores(a, b) == pytest.approx(0.9)  # of two cores
    only_cpu1 = frozenset({1})
    a1 = procfs.CpuTimes(*procfs.parse_proc_stat(before, only_cpu1), monotonic_s=0.0)
    b1 = procfs.CpuTimes(*procfs.parse_proc_stat(after, only_cpu1), monotonic_s=1.0)
    assert procfs.idle_cores(a1, b1) == pytest.approx(0.9)
    assert procfs.idle_cores(a, a) is None
    with pytest.raises(procfs.ProcParseError):
        procfs.parse_proc_stat("intr 1 2 3\n")
    real = procfs.read_cpu_times()
    assert real.n_cpus >= 1 and real.total_ticks >= real.idle_ticks >= 0


def test_process_alive_is_false_for_nonsense_pids() -> None:
    assert not procfs.process_alive(0)
    assert not procfs.process_alive(-1)
    assert not procfs.process_alive(2**22 + 1)
    assert procfs.process_alive(os.getpid())


def test_a_threads_nice_and_policy_are_read_from_its_stat() -> None:
    ready, done = threading.Event(), threading.Event()
    tids: list[int] = []

    def background() -> None:
        tids.append(threading.get_native_id())
        os.setpriority(os.PRIO_PROCESS, tids[0], 7)  # this thread only: a library lowering its own thread
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))  # 0: the calling thread
        ready.set()
        done.wait(10)

    thread = threading.Thread(target=background, daemon=True)
    thread.start()
    try:
        assert ready.wait(10)
        by_tid = {t.tid: t for t in procfs.read_threads(os.getpid())}
        assert (by_tid[tids[0]].nice, by_tid[tids[0]].policy) == (7, os.SCHED_BATCH)
        assert (by_tid[threading.get_native_id()].nice, by_tid[threading.get_native_id()].policy) == (
            os.getpriority(os.PRIO_PROCESS, threading.get_native_id()), 0)
    finally:
        done.set()
        thread.join(10)


def test_parse_stat_fields_keeps_nice_and_policy_in_range() -> None:
    rest = " ".join(["S", "1"] + ["0"] * 14 + ["19"] + ["0"] * 21 + ["5"] + ["0"] * 10)
    st = procfs.parse_stat_fields(f"42 (a b) {rest}")
    assert (st.comm, st.nice, st.policy) == ("a b", 19, 5)
    odd = " ".join(["S", "1"] + ["0"] * 14 + ["99"] + ["0"] * 10)  # out of range and too short for a policy
    st = procfs.parse_stat_fields(f"42 (x) {odd}")
    assert (st.nice, st.policy) == (None, None)


def test_a_thread_that_touches_fresh_memory_counts_its_page_faults() -> None:
    """Each thread's minor faults are its own (stat field 10 of its task): a thread that touches 64 MiB of fresh
    memory takes thousands more, and the thread that watches it does not."""
    ready, go, touched, done = (threading.Event() for _ in range(4))
    tids: list[int] = []

    def toucher() -> None:
        tids.append(threading.get_native_id())
        ready.set()
        go.wait(10)
        buf = bytearray(64 << 20)  # zero-filled pages, faulted in as they are written
        for i in range(0, len(buf), 4096):
            buf[i] = 1
        touched.set()
        done.wait(10)

    thread = threading.Thread(target=toucher, daemon=True)
    thread.start()
    try:
        assert ready.wait(10)
        me = threading.get_native_id()
        before = {t.tid: t for t in procfs.read_threads(os.getpid())}
        go.set()
        assert touched.wait(30)
        after = {t.tid: t for t in procfs.read_threads(os.getpid())}
    finally:
        done.set()
        thread.join(10)
    pages = (64 << 20) // 4096
    assert (after[tids[0]].minflt or 0) - (before[tids[0]].minflt or 0) >= pages // 2
    assert (after[me].minflt or 0) - (before[me].minflt or 0) < pages // 4
    assert after[tids[0]].majflt is not None


def test_parse_stat_fields_reads_the_fault_counts() -> None:
    rest = " ".join(["S", "1", "0", "0", "0", "0", "0", "1234", "5", "67", "8"] + ["0"] * 40)
    st = procfs.parse_stat_fields(f"42 (a) {rest}")
    assert (st.minflt, st.majflt) == (1234, 67)


_CHURN = r"""
import os, sys, time
keep = open(os.path.join(sys.argv[1], "ledger.db"), "ab")
journal = os.path.join(sys.argv[1], "ledger.db-journal")
print("ready", flush=True)
while True:  # a transaction per row: the journal created, written and deleted each time
    with open(journal, "wb") as f:
        f.write(b"x" * 512)
        time.sleep(0.004)
    os.unlink(journal)
    time.sleep(0.004)
"""


def test_the_files_a_process_opens_and_closes_over_and_over_are_told_from_the_ones_it_keeps(tmp_path) -> None:
    """A real child keeps its database open and creates, writes and deletes a journal beside it every 8 ms: each
    reading of its descriptors lists the database, some list the journal; reopened_files names the journal only."""
    from dflash_diag.analysis.sched import reopened_files, reopened_text
    from dflash_diag.model import Observation

    child = subprocess.Popen([sys.executable, "-c", _CHURN, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        readings = []
        for _ in range(40):
            readings.append(procfs.read_process(child.pid))
            threading.Event().wait(0.013)
    finally:
        child.kill()
        child.wait()
    db = str(tmp_path / "ledger.db")
    assert all(r.files_open is not None and db in r.files_open for r in readings)
    journal_seen = sum(1 for r in readings if str(tmp_path / "ledger.db-journal") in (r.files_open or ()))
    assert 0 < journal_seen < len(readings)
    obs = Observation(pid=child.pid, cmdline="python", started_wall_s=0.0, window_s=1.0, stacks=(), proc=(),
                      gpus=(), boards=(), process_alive=True, warnings=(), resources=tuple(readings))
    found = reopened_files(obs)
    assert [f.name for f in found] == ["ledger.db-journal"] and found[0].reopened >= 2
    assert reopened_text(found).startswith("the process opens and closes ledger.db-journal over and over (open at ")


def test_a_file_written_once_in_the_window_is_not_one_opened_over_and_over() -> None:
    from dflash_diag.analysis.sched import reopened_files
    from dflash_diag.model import Observation
    from dflash_diag.model.proc import ProcessSample

    lists = [(), ("/ckpt/step100.pt",), ("/ckpt/step100.pt",), ("/ckpt/step100.pt",), (), (), ("/run/log.txt",),
             (), ("/run/log.txt",), (), ("/run/log.txt",)]
    resources = tuple(ProcessSample(monotonic_s=float(i), rss_bytes=None, threads=None, open_fds=None,
                                    files_open=files) for i, files in enumerate(lists))
    obs = Observation(pid=1, cmdline="python", started_wall_s=0.0, window_s=5.0, stacks=(), proc=(), gpus=(),
                      boards=(), process_alive=True, warnings=(), resources=resources)
    found = reopened_files(obs)
    assert [(f.name, f.open_in, f.readings, f.reopened) for f in found] == [("log.txt", 3, 11, 3)]
