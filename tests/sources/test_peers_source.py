"""Waits that end in another process: /proc/locks and /proc/.../syscall parsed from recorded text, and real processes
blocked on a file lock another holds and on a pipe whose writer is another process."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from dflash_diag.model import Frame, StackSample, ThreadSample
from dflash_diag.model.sched import PeerProcess
from dflash_diag.sources import peers, procfs
from dflash_diag.sources.sched import tcp_addr_text

LOCKS = """1: FLOCK  ADVISORY  WRITE 4321 08:01:5678 0 EOF
1: -> FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF
2: POSIX  ADVISORY  READ 999 00:1b:42 0 EOF
3: OFDLCK ADVISORY  WRITE -1 00:1b:43 0 EOF
garbage line
"""


def test_locks_name_holders_and_waiters() -> None:
    lines = peers.parse_locks(LOCKS)
    assert [(x.pid, x.file_id, x.waiting, x.kind) for x in lines] == [
        (4321, "08:01:5678", False, "FLOCK"), (1234, "08:01:5678", True, "FLOCK"), (999, "00:1b:42", False, "POSIX"),
        (-1, "00:1b:43", False, "OFDLCK")]


def test_syscall_descriptor() -> None:
    x86 = {0: "read", 73: "flock"}
    assert peers.parse_syscall_fd("73 0x5 0x2 0x0 0x0 0x0 0x0 0x7ffc 0x7f12\n", x86) == ("flock", 5)
    assert peers.parse_syscall_fd("0 0x3 0x7f 0x1000 0 0 0 0x7ffc 0x7f12\n", x86) == ("read", 3)
    assert peers.parse_syscall_fd("202 0x7f 0x80 0 0 0 0 0x7ffc 0x7f12\n", x86) is None  # futex: no descriptor
    assert peers.parse_syscall_fd("running\n", x86) is None
    assert peers.parse_syscall_fd("-1 0x7ffc 0x7f12\n", x86) is None


def _wait_blocked(pid: int, timeout_s: float = 20.0) -> tuple:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        threads = procfs.read_threads(pid)
        if any(t.state == "S" and t.syscall is not None and t.syscall != "futex" for t in threads):
            return threads
        time.sleep(0.05)
    raise AssertionError(f"process {pid} never blocked")



def _pipe_writer_peer(argv: list[str], *, env: dict[str, str] | None = None, drain_env: dict[str, str] | None = None,
                      preexec_fn: Callable[[], None] | None = None) -> PeerProcess:
    """The peer a drain process blocked reading a pipe sees: ``argv`` started with its stdout the pipe (with
    ``env``, ``preexec_fn``), the drain with ``drain_env``; both killed after one PeerReader read."""
    writer = subprocess.Popen(argv, stdout=subprocess.PIPE, env=env, preexec_fn=preexec_fn)
    drain = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.buffer.read(1)"], stdin=writer.stdout,
                             env=drain_env)
    try:
        assert writer.stdout is not None
        writer.stdout.close()
        waits = peers.PeerReader(drain.pid, dumper=lambda pid: None).read(_wait_blocked(drain.pid))
    finally:
        for p in (writer, drain):
            p.kill()
            p.wait()
    assert len(waits) == 1 and [q.pid for q in waits[0].peers] == [writer.pid], waits
    return waits[0].peers[0]

def _dump(name: str) -> StackSample:
    frame = Frame(name="compress_chunk", filename="/srv/app/syncer.py", line=30)
    return StackSample(pid=0, monotonic_s=0.0, wall_s=0.0, duration_s=0.01, native=False,
                       threads=(ThreadSample(thread_id=1, os_thread_id=1, name=name, active=True, owns_gil=True,
                                             frames=(frame,)),))


@pytest.mark.slow
def test_a_file_lock_another_process_holds(tmp_path: Path) -> None:
    lock = tmp_path / "registry.lock"
    hold = ("import fcntl, sys, time\nf = open(sys.argv[1], 'a+')\nfcntl.flock(f, fcntl.LOCK_EX)\n"
            "print('held', flush=True)\ntime.sleep(60)\n")
    want = "import fcntl, sys\nf = open(sys.argv[1], 'a+')\nfcntl.flock(f, fcntl.LOCK_EX)\n"
    holder = subprocess.Popen([sys.executable, "-c", hold, str(lock)], stdout=subprocess.PIPE, text=True)
    waiter = None
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        waiter = subprocess.Popen([sys.executable, "-c", want, str(lock)])
        threads = _wait_blocked(waiter.pid)
        reader = peers.PeerReader(waiter.pid, dumper=lambda pid: _dump("MainThread"))
        waits = reader.read(threads)
        time.sleep(0.3)
        again = reader.read(procfs.read_threads(waiter.pid))  # a second read measures the holder's CPU
    finally:
        for p in (holder, waiter):
            if p is not None:
                p.kill()
                p.wait()
    assert len(waits) == 1
    wait = waits[0]
    assert wait.kind == "file-lock" and wait.target.endswith("registry.lock") and wait.tid == waiter.pid
    (peer,) = wait.peers
    assert peer.pid == holder.pid and peer.state == "S" and "python" in peer.cmdline
    assert peer.top_frame == "compress_chunk (syncer.py:30)"  # a Python peer: its busiest frame of its own code
    assert peer.relation == "sibling"  # both are the test process's children
    assert again and again[0].peers[0].cpu_pct is not None


@pytest.mark.slow
def test_a_busy_writer_that_shares_its_cpu_is_read_as_wanting_more_than_it_gets() -> None:
    """The pipe's writer computes flat out on CPU 0 beside another busy process there: it gets about half the core
    and waits for it the rest of the time (its schedstat run delay); the two together are what it wants."""
    busy = "import os; os.sched_setaffinity(0, {0})\nwhile True: pass"  # the writer writes nothing: its reader waits
    rival = subprocess.Popen([sys.executable, "-c", busy.replace("\n", "; print(flush=True)\n")], stdout=subprocess.PIPE)
    writer = subprocess.Popen([sys.executable, "-c", busy], stdout=subprocess.PIPE)
    reader_proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.buffer.read(1)"], stdin=writer.stdout)
    try:
        assert writer.stdout is not None and rival.stdout is not None
        rival.stdout.readline()
        writer.stdout.close()
        reader = peers.PeerReader(reader_proc.pid, dumper=lambda pid: None)
        reader.read(_wait_blocked(reader_proc.pid))
        time.sleep(1.0)
        waits = reader.read(_wait_blocked(reader_proc.pid))
    finally:
        for p in (rival, writer, reader_proc):
            p.kill()
            p.wait()
    (peer,) = waits[0].peers
    assert peer.cpu_pct is not None and peer.cpu_wait_pct is not None, peer
    assert peer.cpu_wait_pct >= 20.0 and peer.cpu_pct + peer.cpu_wait_pct >= 80.0, peer
    from dflash_diag.analysis.peers import peer_text, wants_cpu_pct

    assert wants_cpu_pct(peer) == peer.cpu_pct + peer.cpu_wait_pct
    assert f"waiting for a CPU {peer.cpu_wait_pct:.0f}% of the time" in peer_text(peer)


@pytest.mark.slow
def test_a_pipe_whose_writer_is_another_process() -> None:
    writer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], stdout=subprocess.PIPE)
    reader_proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.buffer.read(1)"], stdin=writer.stdout)
    try:
        assert writer.stdout is not None
        writer.stdout.close()  # only the two processes hold the pipe now
        threads = _wait_blocked(reader_proc.pid)
        waits = peers.PeerReader(reader_proc.pid, dumper=lambda pid: None).read(threads)
    finally:
        for p in (writer, reader_proc):
            p.kill()
            p.wait()
    assert len(waits) == 1
    assert waits[0].kind == "pipe" and waits[0].syscall == "read" and waits[0].target.startswith("pipe:[")
    assert [p.pid for p in waits[0].peers] == [writer.pid]  # the writing end, not the reader itself
    assert waits[0].pipe_capacity_bytes == 65536  # Linux's default, read from the reader's own descriptor


@pytest.mark.slow
def test_a_pseudo_terminal_whose_other_end_is_a_childs_stdout() -> None:
    """A reader on the master side of a pty (what `pty.openpty()` gives a launcher that wants a child to see a
    terminal) is followed to the child that holds the slave as its stdout."""
    script = ("import os, pty, subprocess, sys\n"
              "master, slave = pty.openpty()\n"
              "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], stdout=slave)\n"
              "os.close(slave)\n"
              "print(child.pid, flush=True)\n"
              "os.read(master, 1)\n")
    reader_proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    child_pid = 0
    try:
        assert reader_proc.stdout is not None
        child_pid = int(reader_proc.stdout.readline().split()[0])
        threads = _wait_blocked(reader_proc.pid)
        waits = peers.PeerReader(reader_proc.pid, dumper=lambda pid: None).read(threads)
    finally:
        with contextlib.suppress(ProcessLookupError):
            if child_pid:
                os.kill(child_pid, signal.SIGKILL)
        reader_proc.kill()
        reader_proc.wait()
    assert len(waits) == 1
    (wait,) = waits
    assert wait.kind == "pty" and wait.syscall == "read" and wait.target.startswith("/dev/pts/")
    assert [p.pid for p in wait.peers] == [child_pid] and wait.peers[0].relation == "child"


_SSBD = """
import ctypes, sys, time
libc = ctypes.CDLL(None, use_errno=True)
# prctl(PR_SET_SPECULATION_CTRL, PR_SPEC_STORE_BYPASS, PR_SPEC_DISABLE): the store-bypass mitigation on for this thread
ok = libc.prctl(53, 0, 4, 0, 0) == 0
print("ok" if ok else f"no {ctypes.get_errno()}", flush=True)
time.sleep(60)
"""


@pytest.mark.slow
def test_a_peers_kernel_controls_are_read_from_its_status() -> None:
    """A writer that turned a speculation mitigation on for itself (a hardening profile's prctl): the peer says so."""
    writer = subprocess.Popen([sys.executable, "-c", _SSBD], stdout=subprocess.PIPE, text=True)
    reader_proc = None
    try:
        assert writer.stdout is not None
        said = writer.stdout.readline().strip()
        if said != "ok":
            pytest.skip(f"this CPU or kernel does not let a process control store-bypass speculation ({said})")
        reader_proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.buffer.read(1)"],
                                       stdin=writer.stdout)
        writer.stdout.close()
        waits = peers.PeerReader(reader_proc.pid, dumper=lambda pid: None).read(_wait_blocked(reader_proc.pid))
    finally:
        for p in (writer, reader_proc):
            if p is not None:
                p.kill()
                p.wait()
    (wait,) = waits
    assert wait.peers[0].pid == writer.pid
    assert ("speculative store bypass", "thread mitigated") in wait.peers[0].controls


_TRACER = r"""
import ctypes, os, sys, time
pid, out, detach = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "detached"
if detach and os.fork():  # the parent leaves at once: the tracer is no process of the test's (as a user's strace)
    os._exit(0)
libc = ctypes.CDLL(None, use_errno=True)
ok = libc.ptrace(0x4206, pid, None, None) == 0  # PTRACE_SEIZE: attached, and the tracee runs on
with open(out + ".tmp", "w") as f:
    f.write(f"{os.getpid()} {ok}")
os.rename(out + ".tmp", out)
time.sleep(30)
"""


@pytest.mark.slow
@pytest.mark.parametrize("tracer", ["detached", "ours"])
def test_a_peer_another_process_traces_says_by_whom_and_a_tracer_of_ours_is_not_said(tmp_path: Path,
                                                                                     tracer: str) -> None:
    """The pipe's writer is ptrace-attached by another process (an auditor, a strace): its status' TracerPid is read
    as a kernel control with the tracer's name. A tracer that is this tool's own (here: a child of the test
    process, as the tool's py-spy or gdb would be) is no control of the peer's."""
    writer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], stdout=subprocess.PIPE)
    reader_proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.buffer.read(1)"], stdin=writer.stdout)
    done = tmp_path / "tracer"
    started = subprocess.Popen([sys.executable, "-c", _TRACER, str(writer.pid), str(done), tracer])
    tracer_pid = None
    try:
        assert writer.stdout is not None
        writer.stdout.close()
        deadline = time.monotonic() + 20
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        tracer_pid, ok = done.read_text().split()
        if ok != "True":
            pytest.skip("ptrace is not allowed here")
        waits = peers.PeerReader(reader_proc.pid, dumper=lambda pid: None).read(_wait_blocked(reader_proc.pid))
    finally:
        # the tracer first: a tracee's parent hears of its death only once its tracer has let it go
        if tracer_pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(tracer_pid), 9)
        for p in (started, writer, reader_proc):
            p.kill()
            p.wait()
    (peer,) = waits[0].peers
    traced = [value for name, value in peer.controls if name == "a ptrace tracer"]
    if tracer == "ours":
        assert traced == [], peer.controls
        return
    assert traced == [f"process {tracer_pid} (`python`)"] or traced[0].startswith(f"process {tracer_pid} ("), traced
    from dflash_diag.analysis.peers import peer_text

    assert f"the kernel runs it with a ptrace tracer process {tracer_pid}" in peer_text(peer)


@pytest.mark.slow
def test_a_pipe_set_to_one_page_is_read_as_such_and_left_as_it_was() -> None:
    # The program shrinks its stdin pipe to one page (F_SETPIPE_SZ), as subprocess's pipesize= does, then blocks
    # reading it; the test process holds the writing end. After the reading the pipe still works: the page written
    # then is read by the program, which says so.
    shrink = ("import fcntl, sys\nfcntl.fcntl(0, fcntl.F_SETPIPE_SZ, 4096)\nprint('set', flush=True)\n"
              "sys.stdin.buffer.read(4096)\nprint('got', flush=True)\n")
    program = subprocess.Popen([sys.executable, "-c", shrink], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               text=True)
    try:
        assert program.stdout is not None and program.stdin is not None
        assert program.stdout.readline().strip() == "set"
        threads = _wait_blocked(program.pid)
        waits = peers.PeerReader(program.pid, dumper=lambda pid: None).read(threads)
        program.stdin.write("y" * 4096)
        program.stdin.flush()
        assert program.stdout.readline().strip() == "got"
    finally:
        program.kill()
        program.wait()
    assert len(waits) == 1 and waits[0].kind == "pipe"
    assert waits[0].pipe_capacity_bytes == 4096


def test_a_pipes_capacity_away_from_the_default_is_said() -> None:
    from dflash_diag.analysis.peers import describe
    from dflash_diag.model.sched import OutsideWait, PeerProcess

    peer = PeerProcess(pid=7, comm="python", cmdline="python decoder.py", state="S", cpu_pct=45.0, top_frame="",
                       relation="child")
    small = OutsideWait(tid=1, kind="pipe", target="pipe:[9]", syscall="read", peers=(peer,), monotonic_s=0.0,
                        pipe_capacity_bytes=4096)
    assert describe(small).endswith("; the pipe's capacity is 4 KiB, set below Linux's default 64 KiB "
                                    "(F_SETPIPE_SZ): its writer can get only that far ahead of its reader, and what "
                                    "it sends crosses in pieces of that size")
    default = replace(small, pipe_capacity_bytes=65536)
    assert "capacity" not in describe(default) and "capacity" not in describe(replace(small, pipe_capacity_bytes=None))


def test_nothing_blocked_reads_nothing() -> None:
    # A process of its own, with no pipe to anyone: the test's own process may be an xdist worker whose I/O thread
    # really does wait on a pipe from its parent (a true outside wait, not nothing).
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        assert peers.PeerReader(child.pid).read(procfs.read_threads(child.pid)) == ()
    finally:
        child.kill()
        child.wait()


def test_describe_for_the_graph() -> None:
    from dflash_diag.analysis.peers import describe
    from dflash_diag.model.sched import OutsideWait, PeerProcess

    peer = PeerProcess(pid=4321, comm="python", cmdline="python syncer.py /runs", state="R", cpu_pct=97.0,
                       top_frame="pack (syncer.py:12)", relation="child")
    lock = OutsideWait(tid=1, kind="file-lock", target="/runs/registry.lock", syscall="flock/fcntl", peers=(peer,),
                       monotonic_s=0.0)
    assert describe(lock) == ("a file lock on `/runs/registry.lock` held by process 4321 (its child) `python syncer.py "
                              "/runs`: running, 97% CPU, in pack (syncer.py:12)")
    pipe = OutsideWait(tid=1, kind="pipe", target="pipe:[9]", syscall="read", peers=(peer,), monotonic_s=0.0)
    assert describe(pipe).startswith("a pipe from process 4321 (its child)")
    mitigated = replace(pipe, peers=(replace(peer, controls=(("speculative store bypass", "thread mitigated"),)),))
    assert describe(mitigated).endswith(", the kernel runs it with speculative store bypass thread mitigated (a "
                                        "mitigation forced for this process (prctl PR_SET_SPECULATION_CTRL): loads "
                                        "wait for earlier stores' addresses, slower memory-bound code) (its /proc "
                                        "status)")
    pty = replace(pipe, kind="pty", target="/dev/pts/3")
    assert describe(pty).startswith("a pseudo-terminal (/dev/pts/3) from process 4321 (its child) `python syncer.py "
                                    "/runs`: running, 97% CPU, in pack (syncer.py:12): its bytes pass the kernel's "
                                    "terminal layer")


def test_a_lock_waited_on_by_no_thread_seen_in_flock_names_no_thread(tmp_path: Path) -> None:
    """/proc/locks says the process waits, but no thread's syscall shows flock/fcntl (the lock was granted between
    the two reads): which thread waited is unknown, so nothing is said (it once fell back to the main thread, and
    the graph took the main thread's join for a wait on the lock)."""
    pid, tid = 1234, 1240
    (tmp_path / "locks").write_text(LOCKS)
    task = tmp_path / str(pid) / "task" / str(tid)
    task.mkdir(parents=True)
    (task / "syscall").write_text("202 0x7f 0x80 0 0 0 0 0x7ffc 0x7f12\n")  # futex: no descriptor
    threads = (procfs.ProcThreadSample(tid=tid, comm="python", state="S", utime_s=0.0, stime_s=0.0, run_ns=0,
                                       runq_wait_ns=0, monotonic_s=0.0, syscall="syscall 202"),)
    reader = peers.PeerReader(pid, proc_root=tmp_path, dumper=lambda p: None)
    assert reader.read(threads) == ()
    # The same lock with the thread seen in flock on a descriptor of that file: the wait, from that thread.
    (task / "syscall").write_text("73 0x5 0x2 0x0 0x0 0x0 0x0 0x7ffc 0x7f12\n")
    (tmp_path / str(pid) / "fd").mkdir()
    waits = reader.read(threads)
    assert [(w.tid, w.kind) for w in waits] == [(tid, "file-lock")]
    # procfs names flock now (its table has the calls on descriptors): still followed; a sync is not a peer's.
    import dataclasses

    named = (dataclasses.replace(threads[0], syscall="flock"),)
    assert [(w.tid, w.kind) for w in reader.read(named)] == [(tid, "file-lock")]
    assert reader.read((dataclasses.replace(threads[0], syscall="fsync"),)) == ()


TCP = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1 0 100 0 0 10 0
   1: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 222 1 0 20 4 30 10 -1
   2: 0100007F:C350 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 333 1 0 20 4 30 10 -1
   3: 0100007F:C351 0100007F:1F90 06 00000000:00000000 03:00000000 00000000     0        0 0 3 0 0 0 0 0 0
short line
"""


def test_tcp_tables_and_addresses_are_parsed() -> None:
    table = peers.parse_tcp_table(TCP)
    assert table == {111: ("0100007F:1F90", "00000000:0000"), 222: ("0100007F:1F90", "0100007F:C350"),
                     333: ("0100007F:C350", "0100007F:1F90")}  # the time-wait line (inode 0) is left out
    assert tcp_addr_text("0100007F:1F90") == "127.0.0.1:8080"


_SERVER = """
import socket, sys
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
print(srv.getsockname()[1], flush=True)
conn, _ = srv.accept()
conn.recv(8)  # waits for a request that never comes: both ends read
"""
_CLIENT = """
import socket, sys
c = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
c.recv(8)  # waits for a reply
"""


def test_a_tcp_connection_whose_other_end_is_a_process_here_that_waits_too() -> None:
    server = subprocess.Popen([sys.executable, "-c", _SERVER], stdout=subprocess.PIPE, text=True)
    client = None
    try:
        assert server.stdout is not None
        port = server.stdout.readline().strip()
        client = subprocess.Popen([sys.executable, "-c", _CLIENT, port])
        threads = _wait_blocked(client.pid)
        time.sleep(0.3)  # the server accepted and is blocked in its own recv
        reader = peers.PeerReader(client.pid, dumper=lambda pid: None)
        waits = reader.read(threads)
        # A connection's ends are found once: the next read of the same wait walks no connection table (each walk
        # is the namespace's whole hash), and says the same.
        walks: list[int] = []
        table = reader._tcp_table
        reader._tcp_table = lambda: walks.append(1) or table()  # type: ignore[method-assign]
        again = reader.read(threads)
    finally:
        for p in (client, server):
            if p is not None:
                p.kill()
                p.wait()
    assert len(waits) == 1, waits
    assert walks == [] and [(w.target, w.peer_waits_back) for w in again] == [(w.target, w.peer_waits_back)
                                                                              for w in waits]
    wait = waits[0]
    assert wait.kind == "socket" and wait.target == f"TCP 127.0.0.1:{port}"
    assert [p.pid for p in wait.peers] == [server.pid] and wait.peer_waits_back
    from dflash_diag.analysis.peers import describe
    assert describe(wait).startswith(f"a TCP 127.0.0.1:{port} connection from process {server.pid}")
    assert "which waits reading the same connection: both ends wait for bytes in flight" in describe(wait)


# A server whose socket is capped at 1 MB/s (SO_MAX_PACING_RATE, 47 on Linux) streams to a client that reads it all.
_PACED_SERVER = """
import socket
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
print(srv.getsockname()[1], flush=True)
conn, _ = srv.accept()
conn.setsockopt(socket.SOL_SOCKET, 47, 1_000_000)
while True:
    conn.sendall(bytes(1 << 20))
"""
_READER = """
import socket, sys
c = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
while c.recv(1 << 16):
    pass
"""


def test_a_tcp_connections_sending_end_capped_by_its_pacing_rate_is_said_with_the_cap() -> None:
    # The kernel's own accounting of the server's socket (tcp_info over the socket diagnostics): its pacing cap is
    # the cause of the reader's wait, which no stack and no /proc file shows.
    server = subprocess.Popen([sys.executable, "-c", _PACED_SERVER], stdout=subprocess.PIPE, text=True)
    client = None
    try:
        assert server.stdout is not None
        port = server.stdout.readline().strip()
        client = subprocess.Popen([sys.executable, "-c", _READER, port])
        threads = _wait_blocked(client.pid)
        waits = peers.PeerReader(client.pid, dumper=lambda pid: None).read(threads)
    finally:
        for p in (client, server):
            if p is not None:
                p.kill()
                p.wait()
    (wait,) = waits
    assert wait.sender is not None and wait.sender.max_pacing_rate_bytes_s == 1_000_000, wait.sender
    from dflash_diag.analysis.peers import describe
    assert describe(wait).endswith("; the sending end's socket sends at most 1.0 MB/s (8 Mbit/s) (SO_MAX_PACING_RATE: "
                                   "the kernel paces every byte it sends to that rate)"), describe(wait)


# A server that reads a little every 50 ms through a small receive buffer; its client sends without pause.
_SLOW_READER = """
import socket, time
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
srv.bind(("127.0.0.1", 0)); srv.listen(1)
print(srv.getsockname()[1], flush=True)
conn, _ = srv.accept()
while True:
    conn.recv(2048)
    time.sleep(0.05)
"""
_SENDER = """
import socket, sys
c = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
while True:
    c.sendall(bytes(1 << 16))
"""


def test_a_thread_blocked_sending_waits_on_its_peer_and_the_receivers_window_is_said() -> None:
    # Python's sendall blocks in sendto: the thread waits for the peer to drain, and its own socket's accounting
    # says the receiver's window held it back (the reader's small buffer), not that it waits reading.
    server = subprocess.Popen([sys.executable, "-c", _SLOW_READER], stdout=subprocess.PIPE, text=True)
    client = None
    try:
        assert server.stdout is not None
        port = server.stdout.readline().strip()
        client = subprocess.Popen([sys.executable, "-c", _SENDER, port])
        threads = _wait_blocked(client.pid)
        time.sleep(1.0)  # a second of sending against the slow reader: the accounting's share settles
        waits = peers.PeerReader(client.pid, dumper=lambda pid: None).read(procfs.read_threads(client.pid))
    finally:
        for p in (client, server):
            if p is not None:
                p.kill()
                p.wait()
    assert threads
    (wait,) = waits
    assert wait.kind == "socket" and wait.syscall in ("sendto", "write") and not wait.peer_waits_back
    from dflash_diag.analysis.peers import describe
    text = describe(wait)
    assert text.startswith(f"a TCP 127.0.0.1:{port} connection to process {server.pid}"), text
    assert "this end was held back by the other end's receive window" in text, (text, wait.sender)


def test_a_peers_command_line_hides_a_secret_it_repeats_under_a_harmless_option() -> None:
    # The rank a launcher waits on was started with `--api-token T --mirror T`: the option's redaction hides the
    # first, the value known to be secret hides the second (it reached a bundle's trace.json through a finding).
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "--api-token",
                              "peerTok0123456789", "--mirror", "peerTok0123456789"])
    try:
        time.sleep(0.2)
        peer = peers.PeerReader(child.pid)._peer(child.pid, time.monotonic())
    finally:
        child.kill()
        child.wait()
    assert "peerTok0123456789" not in peer.cmdline
    assert "--api-token <redacted>" in peer.cmdline and "--mirror <redacted>" in peer.cmdline


# A client of a multiprocessing manager: its queue lives in the manager's server process, and get() is a request
# and a reply on a unix socket, so the client's thread blocks reading that socket while the server waits for an item.
_MANAGED = """
import multiprocessing as mp
if __name__ == "__main__":
    manager = mp.Manager()
    print(manager._process.pid, flush=True)
    manager.Queue().get()  # nothing is ever put: the server's thread waits in queue.get, the client in read
"""


@pytest.mark.slow
def test_a_unix_socket_whose_other_end_is_a_managers_server() -> None:
    client = subprocess.Popen([sys.executable, "-c", _MANAGED], stdout=subprocess.PIPE, text=True)
    server_pid = 0
    try:
        assert client.stdout is not None
        server_pid = int(client.stdout.readline())
        deadline = time.monotonic() + 20.0
        waits: tuple = ()
        while not waits and time.monotonic() < deadline:  # the first reads may land before get() is made
            waits = peers.PeerReader(client.pid, dumper=lambda pid: None).read(_wait_blocked(client.pid))
            time.sleep(0.1)
        # no peer for a socket whose peer the kernel does not name (sock_diag unavailable): the wait stays unread
        blind = peers.PeerReader(client.pid, dumper=lambda pid: None, unix_peer=lambda inode: None)
        unread = blind.read(_wait_blocked(client.pid))
    finally:
        client.kill()
        client.wait()
        if server_pid:  # the manager's server outlives a killed client: it is ours to end
            with contextlib.suppress(ProcessLookupError):
                os.kill(server_pid, signal.SIGKILL)
    assert len(waits) == 1, waits
    wait = waits[0]
    assert wait.kind == "socket" and wait.target == "unix socket" and wait.syscall == "read"
    assert [p.pid for p in wait.peers] == [server_pid] and wait.peers[0].relation == "child"
    from dflash_diag.analysis.peers import describe
    assert describe(wait).startswith(f"a unix socket connection from process {server_pid} (its child)")
    assert unread == ()


def test_a_sock_diag_reply_is_read_only_where_every_length_holds() -> None:
    import socket
    import struct

    from dflash_diag.sources import sock_diag
    msg = struct.pack("=BBBBIII", socket.AF_UNIX, 1, 1, 0, 77, 0, 0)
    attr = struct.pack("=HHI", 8, sock_diag.UNIX_DIAG_PEER, 78)
    body = msg + attr
    header = struct.pack("=IHHII", 16 + len(body), sock_diag.SOCK_DIAG_BY_FAMILY, 0, 1, 0)
    assert sock_diag.parse_peer(header + body, 77) == 78
    assert sock_diag.parse_peer(header + body, 76) is None  # another socket's message
    assert sock_diag.parse_peer((header + body)[:-2], 77) is None  # truncated: the header's length overruns it
    bad_attr = header + msg + struct.pack("=HHI", 200, sock_diag.UNIX_DIAG_PEER, 78)
    assert sock_diag.parse_peer(bad_attr, 77) is None
    error = struct.pack("=IHHII", 36, 2, 0, 1, 0) + b"\0" * 20
    assert sock_diag.parse_peer(error, 77) is None
    # the real kernel: the two ends of a socketpair name each other; a listener has no peer
    a, b = socket.socketpair()
    with a, b, socket.socket(socket.AF_UNIX) as listener:
        listener.bind(b"\0dflash-diag-test-listener")
        listener.listen()
        ia, ib = (os.fstat(s.fileno()).st_ino for s in (a, b))
        assert (sock_diag.unix_peer_inode(ia), sock_diag.unix_peer_inode(ib)) == (ib, ia)
        assert sock_diag.unix_peer_inode(os.fstat(listener.fileno()).st_ino) is None


def test_a_forked_childs_top_frame_is_its_own_not_its_parents_at_the_fork() -> None:
    """A manager's server forked from `manager.start()` in the parent's main: its main thread's stack still holds
    the parent's frames outside multiprocessing's bootstrap, which are not what the server does."""
    mp = "/usr/lib/python3.11/multiprocessing"
    server = (Frame("Condition.wait", "/usr/lib/python3.11/threading.py", 331),
              Frame("Server.serve_forever", f"{mp}/managers.py", 176),
              Frame("BaseProcess._bootstrap", f"{mp}/process.py", 314),
              Frame("Popen._launch", f"{mp}/popen_fork.py", 71), Frame("main", "/srv/app/train.py", 120))
    serving = (Frame("Connection._recv", f"{mp}/connection.py", 395),
               Frame("Server.serve_client", f"{mp}/managers.py", 253))
    dump = StackSample(pid=0, monotonic_s=0.0, wall_s=0.0, duration_s=0.01, native=False, threads=(
        ThreadSample(thread_id=1, os_thread_id=1, name="MainThread", active=False, owns_gil=False, frames=server),
        ThreadSample(thread_id=2, os_thread_id=2, name="Thread-3", active=True, owns_gil=True, frames=serving)))
    assert peers._busiest_frame(dump) == "Connection._recv (connection.py:395)"
    scanner = (Frame("scan_once", "/srv/app/scans.py", 26), *server[2:])  # its own code inside the bootstrap
    assert peers._busiest_frame(replace(dump, threads=(replace(dump.threads[0], frames=scanner),))) == \
        "scan_once (scans.py:26)"


# A writer child with unbuffered output (python -u): print(*fields) makes a write(2) per field and separator.
_CHATTY = "import sys\nwhile True:\n    print('hive', 17, 0.5, 'ok', sep=',')\n"
_DRAIN = "import sys\nfor line in sys.stdin:\n    pass\n"


@pytest.mark.slow
@pytest.mark.parametrize("unbuffered", [True, False], ids=["unbuffered", "buffered"])
def test_a_pipe_writers_small_writes_are_counted(unbuffered: bool) -> None:
    """The writer's write calls and bytes a second come from its /proc/PID/io between two reads: an unbuffered
    writer makes calls of a few bytes each and is said to; a block-buffered one writes KiB a call and is not."""
    from dflash_diag.analysis.peers import peer_text
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # the buffered writer must buffer
    writer = subprocess.Popen([sys.executable, *(["-u"] if unbuffered else []), "-c", _CHATTY],
                              stdout=subprocess.PIPE, env=env)
    drain = subprocess.Popen([sys.executable, "-c", _DRAIN], stdin=writer.stdout)
    try:
        assert writer.stdout is not None
        writer.stdout.close()
        reader = peers.PeerReader(drain.pid, dumper=lambda pid: None)
        peer = None
        deadline = time.monotonic() + 20.0
        while time.monotonic() < deadline:
            waits = reader.read(_wait_blocked(drain.pid))
            found = [w.peers[0] for w in waits if w.kind == "pipe" and w.peers]
            if found and found[0].write_calls_per_s is not None:
                peer = found[0]
                break
            time.sleep(0.3)
    finally:
        for p in (writer, drain):
            p.kill()
            p.wait()
    assert peer is not None and peer.pid == writer.pid
    assert peer.written_bytes_per_s is not None and peer.write_calls_per_s is not None
    each = peer.written_bytes_per_s / peer.write_calls_per_s
    if unbuffered:
        assert peer.write_calls_per_s > 2_000 and each < 16, (peer.write_calls_per_s, each)
        assert "write calls a second of" in peer_text(peer) and "its output is not buffered" in peer_text(peer)
    else:
        assert each > 1024, each
        assert "a system call per few bytes" not in peer_text(peer)


@pytest.mark.slow
def test_a_peers_settings_are_read_from_its_environment_and_said_where_they_apply() -> None:
    """The writer at a pipe's other end was started with LC_ALL=C.UTF-8 and PYTHONUNBUFFERED=1 (a launcher's env):
    both are read from its /proc/PID/environ; a C program (`sleep` here) is said to run under the locale, not under
    the interpreter's setting, which only a Python peer reads. LC_ALL=C is the default's fast path: not said."""
    from dflash_contract.settings import ENV_BY_NAME
    from dflash_diag.analysis.peers import peer_settings, peer_text

    def writer_peer(env_extra: dict[str, str]):  # type: ignore[no-untyped-def]
        # none of the catalogue's settings but those given (a box may export its own: OPENBLAS_CORETYPE=Haswell)
        env = {**{k: v for k, v in os.environ.items() if k not in ENV_BY_NAME and not k.startswith(("LC_", "PYTHON"))},
               **env_extra}
        return _pipe_writer_peer(["sleep", "30"], env=env)

    peer = writer_peer({"LC_ALL": "C.UTF-8", "PYTHONUNBUFFERED": "1"})
    assert set(peer.settings) == {("LC_ALL", "C.UTF-8"), ("PYTHONUNBUFFERED", "1")}
    assert peer_settings(peer) == (("LC_ALL", "C.UTF-8"),)  # sleep is no Python: its stdout is not the interpreter's
    assert "started with LC_ALL=C.UTF-8 (the C library's locale for everything" in peer_text(peer)
    assert writer_peer({"LC_ALL": "C"}).settings == ()


def test_a_peers_environment_and_limits_are_told_apart_from_the_processs() -> None:
    """A launcher gave the pipe's writer a variable the catalogue does not know, another value of one the process
    has and none of a third, and a limit of 64 open files: the names are read against the process's environment at
    start, never their values, and a shell's bookkeeping is not a difference; the limit with both values."""
    from dflash_diag.analysis.peers import peer_text

    own = {k: v for k, v in os.environ.items() if k != "ZQ_SWITCH"}
    own.update({"ZQ_MODE": "fast", "ZQ_ZONE": "UTC", "SHLVL": "1"})
    theirs = {k: v for k, v in own.items() if k != "ZQ_ZONE"}
    theirs.update({"ZQ_SWITCH": "hunter2", "ZQ_MODE": "slow", "SHLVL": "2"})
    import resource

    soft_own, hard = resource.getrlimit(resource.RLIMIT_NOFILE)

    def launcher() -> None:  # a launcher's setrlimit, nice and pinning too
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
        os.nice(5)
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})

    peer = _pipe_writer_peer(["sleep", "30"], env=theirs, drain_env=own, preexec_fn=launcher)
    assert peer.env_differs == ("+ZQ_SWITCH", "~ZQ_MODE", "-ZQ_ZONE"), peer.env_differs
    assert [(name, theirs) for name, theirs, _ in peer.limits_differ] == [("open files", "64")], peer.limits_differ
    cpu = str(min(os.sched_getaffinity(0)))
    assert peer.sched_differs[0] == ("nice", str(os.nice(0) + 5), str(os.nice(0))), peer.sched_differs
    assert peer.sched_differs[1:] == ((("CPUs allowed", cpu, peer.sched_differs[1][2]),)
                                      if len(os.sched_getaffinity(0)) > 1 else ()), peer.sched_differs
    text = peer_text(peer)
    assert ", its environment, against this process's at start, sets ZQ_SWITCH, changes ZQ_MODE and lacks ZQ_ZONE, " \
           "the scheduler runs it, against this process's main thread, at nice " in text, text
    assert text.endswith(f", its resource limits, against this process's: open files 64 (here {soft_own:,})"), text
    assert "hunter2" not in repr(peer) and "slow" not in text
    assert peers.env_differences({"A": "1"}, {"A": "1"}) == ()
    many = peers.env_differences({}, {f"V{i}": "1" for i in range(20)})
    assert len(many) == peers.MAX_ENV_DIFFERENCES


def test_a_peers_interpreter_options_are_read_as_the_settings_they_equal() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    peer = _pipe_writer_peer([sys.executable, "-X", "dev", "-c", "import time; time.sleep(30)"], env=env)
    assert ("PYTHONDEVMODE", "1") in peer.settings, peer.settings


def test_a_peers_inherited_settings_are_said_only_where_what_it_does_is_their_effect() -> None:
    """A busy worker child that only inherited the trainer's PYTHONUNBUFFERED=1 and PYTHONDONTWRITEBYTECODE=1 and
    reads a few bytes a call (name lookups reading /etc/hosts) was said to be "started with PYTHONUNBUFFERED=1
    (...unbuffered...)": read as the cause, unweighed. Inherited settings are said only where its writes are tiny
    (what an unbuffered stream does); one a launcher gave it is said as before."""
    from dflash_diag.analysis.peers import peer_text
    from dflash_diag.model.sched import PeerProcess

    inherited = (("PYTHONUNBUFFERED", "1"), ("PYTHONDONTWRITEBYTECODE", "1"))
    reader = PeerProcess(pid=7, comm="python", cmdline="python worker.py", state="R", cpu_pct=95.0,
                         top_frame="send (qc.py:21)", relation="child", kernel_pct=50.0,
                         read_calls_per_s=150_000.0, read_bytes_per_s=150_000.0 * 24,
                         write_calls_per_s=40.0, written_bytes_per_s=40.0 * 65536, settings=inherited)
    text = peer_text(reader, "pipe", frozenset(inherited))
    assert "150,000 read calls a second of 24 bytes" in text and "started with" not in text, text
    assert "started with PYTHONUNBUFFERED=1" in peer_text(reader, "pipe")  # nothing read of the trainer's own: said

    writer = replace(reader, write_calls_per_s=500_000.0, written_bytes_per_s=500_000.0 * 3)
    text = peer_text(writer, "pipe", frozenset(inherited))
    assert "500,000 write calls a second of 3 bytes" in text and "started with PYTHONUNBUFFERED=1" in text, text
    assert "PYTHONDONTWRITEBYTECODE" not in text  # a start-up setting says nothing of a running writer

    given = replace(reader, settings=(("LC_ALL", "C.UTF-8"), *inherited))
    assert "started with LC_ALL=C.UTF-8" in peer_text(given, "pipe", frozenset(inherited))


def test_a_diagnostics_setting_a_launcher_gave_is_said_before_its_pool_sizes() -> None:
    """Batch 18's decoder child was given OMP_NUM_THREADS=1, OPENBLAS_NUM_THREADS=1 and LD_BIND_NOT=1: two are
    shown, and the dynamic linker's (it costs on every call) is one of them, first."""
    from dflash_diag.analysis.peers import peer_settings, peer_text
    from dflash_diag.model.sched import PeerProcess

    peer = PeerProcess(pid=7, comm="python", cmdline="python decoder.py", state="R", cpu_pct=96.0, top_frame="",
                       relation="child", settings=(("OMP_NUM_THREADS", "1"), ("OPENBLAS_NUM_THREADS", "1"),
                                                   ("LD_BIND_NOT", "1")))
    assert peer_settings(peer) == (("LD_BIND_NOT", "1"), ("OMP_NUM_THREADS", "1"))
    assert "started with LD_BIND_NOT=1 (the dynamic linker resolves a lazily bound function again" in peer_text(peer)


def test_a_setting_given_at_its_default_value_is_not_said() -> None:
    """Batch 19's twin started its parser with PYTHONMALLOC=pymalloc, what the interpreter does unset: said as
    'started with PYTHONMALLOC=pymalloc', it read as the busy child's cause. Its planted program's malloc_debug is."""
    from dflash_diag.analysis.peers import peer_settings, peer_text
    from dflash_diag.model.sched import PeerProcess

    peer = PeerProcess(pid=7, comm="python", cmdline="python xrfparse.py", state="R", cpu_pct=96.0, top_frame="",
                       relation="child", settings=(("PYTHONMALLOC", "pymalloc"),))
    assert peer_settings(peer) == () and "started with" not in peer_text(peer)
    debug = replace(peer, settings=(("PYTHONMALLOC", "malloc_debug"),))
    assert "started with PYTHONMALLOC=malloc_debug (the interpreter's allocator" in peer_text(debug)


def test_a_peers_cpu_quota_in_a_cgroup_the_process_is_not_in_is_a_control_where_it_binds(tmp_path: Path) -> None:
    """Batch 19's decoder child was put in a cgroup of its own with a 0.3-CPU quota (cgroup v1 here): throttled in
    most periods, it is said as a control of the peer; its twin's 1.5-CPU quota, never reached, is not; the
    process's own group's quota is the scheduler readings', not a peer's."""
    from dflash_diag.sources.peers import PeerReader

    proc, cgroups = tmp_path / "proc", tmp_path / "cgroup"
    for pid, group in ((10, "/"), (11, "/rockfall-decoder-10"), (12, "/")):
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "cgroup").write_text(f"4:memory:/\n1:cpu:{group}\n0::/\n")

    def group(name: str, quota_us: int, periods: int, throttled: int) -> None:
        d = cgroups / "cpu" / name if name else cgroups / "cpu"
        d.mkdir(parents=True, exist_ok=True)
        (d / "cpu.cfs_quota_us").write_text(f"{quota_us}\n")
        (d / "cpu.cfs_period_us").write_text("100000\n")
        (d / "cpu.stat").write_text(f"nr_periods {periods}\nnr_throttled {throttled}\nthrottled_time 9000000\n")

    group("", -1, 0, 0)
    group("rockfall-decoder-10", 30_000, 51, 49)
    reader = PeerReader(10, proc_root=proc, cgroup_root=cgroups)
    assert reader._cpu_quota(11) == (("a CPU quota", "of 0.30 CPU (cgroup `rockfall-decoder-10`, one the process is "
                                                     "not in): throttled in 96% of its 51 periods"),)
    assert reader._cpu_quota(12) == ()  # the process's own group
    group("rockfall-decoder-10", 150_000, 51, 0)  # the twin's quota, never reached
    assert reader._cpu_quota(11) == ()
    from dflash_diag.analysis.settings import control_effect
    assert control_effect("a CPU quota").startswith("the kernel runs its group's tasks only that much CPU time")


def _cgroup_files(root: Path, name: str, files: dict[str, str]) -> None:
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    for file, text in files.items():
        (d / file).write_text(text)


def test_a_peers_memory_limit_in_a_cgroup_the_process_is_not_in_is_a_control_where_it_binds(tmp_path: Path) -> None:
    """Batch 27's tile reader child runs in a memory cgroup of its own limited to 64 MiB (v1 here): the page cache of
    the tiles it reads is charged to it, and the kernel reclaims it on every read. Between two reads its failcnt
    climbs: said, with the pages charged to it. Its twin's 1 GiB limit, never met, is not; nor the process's own
    group's limit; nor a limit the peer reached once and no longer meets."""
    from dflash_diag.sources.peers import PeerReader

    proc, cgroups = tmp_path / "proc", tmp_path / "cgroup"
    for pid, group in ((10, "/job"), (11, "/samphire-reader-10"), (12, "/job")):
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "cgroup").write_text(f"4:memory:{group}\n1:cpu:/\n0::/\n")
    unlimited = "9223372036854771712\n"
    _cgroup_files(cgroups, "memory", {"memory.limit_in_bytes": unlimited})
    _cgroup_files(cgroups / "memory", "job", {"memory.limit_in_bytes": f"{8 << 30}\n", "memory.failcnt": "0\n"})

    def reader_group(limit: int, usage: int, failcnt: int, pgpgin: int) -> None:
        _cgroup_files(cgroups / "memory", "samphire-reader-10", {
            "memory.limit_in_bytes": f"{limit}\n", "memory.usage_in_bytes": f"{usage}\n",
            "memory.failcnt": f"{failcnt}\n", "memory.stat": f"cache 57774080\nrss 7852032\npgpgin {pgpgin}\n"})

    now = [100.0]
    reader = PeerReader(10, proc_root=proc, cgroup_root=cgroups, clock=lambda: now[0])
    reader_group(64 << 20, 67_018_752, 1_980_181, 1_942_001)
    assert reader._memory_limit(11) == ()  # one reading: nothing to weigh yet
    now[0] += 2.0
    reader_group(64 << 20, 67_076_096, 2_267_473, 2_219_886)
    said = reader._memory_limit(11)
    assert said == (("a memory limit", "of 64 MiB (cgroup `samphire-reader-10`, one the process is not in): its "
                     "usage at the limit, which its charges met 143,646 times a second between reads "
                     "(memory.failcnt), each met by reclaiming its own pages; 569.1 MB/s of pages charged to it "
                     "(memory.stat pgpgin)"),)
    now[0] += 0.1
    assert reader._memory_limit(11) == said  # read again within the sweep (a second wait on it): the same answer
    assert reader._memory_limit(12) == ()  # the process's own group
    now[0] += 2.0
    reader_group(64 << 20, 67_076_096, 2_267_473, 2_219_990)  # at its limit, but no longer meeting it
    assert reader._memory_limit(11) == ()
    twin = PeerReader(10, proc_root=proc, cgroup_root=cgroups, clock=lambda: now[0])
    reader_group(1 << 30, 500_396_032, 0, 20_872)  # the twin's 1 GiB, never met
    assert twin._memory_limit(11) == ()
    now[0] += 2.0
    reader_group(1 << 30, 500_244_480, 0, 20_876)
    assert twin._memory_limit(11) == ()
    from dflash_diag.analysis.settings import control_effect
    assert "page cache" in control_effect("a memory limit")


def test_a_memory_limit_on_cgroup_v2_counts_its_events_and_refaults(tmp_path: Path) -> None:
    """On cgroup v2 the limit is memory.max (or memory.high), its hits memory.events' max and high, and what reclaim
    costs the file pages read again (workingset_refault_file)."""
    from dflash_diag.sources.peers import memory_limit_control
    from dflash_diag.sources.sched import read_cgroup_memory

    _cgroup_files(tmp_path, "", {"memory.max": "max\n"})
    _cgroup_files(tmp_path, "helper", {
        "memory.max": "max\n", "memory.high": f"{48 << 20}\n", "memory.current": f"{48 << 20}\n",
        "memory.events": "low 0\nhigh 100\nmax 20\noom 0\noom_kill 0\n",
        "memory.stat": "file 40000000\nworkingset_refault_file 1000\n"})
    before = read_cgroup_memory((2, [tmp_path / "helper", tmp_path]))
    assert before is not None and before.limit_bytes == 48 << 20 and before.limit_hits == 120
    (tmp_path / "helper" / "memory.events").write_text("low 0\nhigh 300\nmax 20\noom 0\noom_kill 0\n")
    (tmp_path / "helper" / "memory.stat").write_text("file 40000000\nworkingset_refault_file 25414\n")
    after = read_cgroup_memory((2, [tmp_path / "helper", tmp_path]))
    assert after is not None
    (name, value), = memory_limit_control(before, after, 1.0)
    assert name == "a memory limit" and value.startswith("of 48 MiB (cgroup `helper`")
    assert "met 200 times a second between reads (memory.events max and high)" in value
    assert value.endswith(f"{24414 * 4096 / 1e6:,.1f} MB/s of file pages read again after "
                          "reclaim (workingset_refault_file)")
    assert read_cgroup_memory((2, [tmp_path])) is None  # no finite limit anywhere: nothing to bind


def test_a_peers_block_io_limit_it_runs_at_is_a_control_and_one_it_keeps_under_is_not(tmp_path: Path) -> None:
    """Batch 28's scan reader child runs in a blkio cgroup of its own capped at 24 MiB/s of reads (v1 here): between
    two reads it reads at the cap, said with what it read. Its twin's cap, far above what it reads, is not."""
    from dflash_diag.sources.peers import PeerReader

    proc, cgroups = tmp_path / "proc", tmp_path / "cgroup"
    for pid, group in ((10, "/"), (11, "/kame-reader-10")):
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "cgroup").write_text(f"7:blkio:{group}\n1:cpu:/\n0::/\n")
    (cgroups / "blkio").mkdir(parents=True)

    def reader_group(limit_bps: int, read_bytes: int) -> None:
        _cgroup_files(cgroups / "blkio", "kame-reader-10", {
            "blkio.throttle.read_bps_device": f"254:0 {limit_bps}\n",
            "blkio.throttle.write_bps_device": "",
            "blkio.throttle.io_service_bytes": f"254:0 Read {read_bytes}\n254:0 Write 0\nTotal {read_bytes}\n"})

    now = [100.0]
    reader = PeerReader(10, proc_root=proc, cgroup_root=cgroups, clock=lambda: now[0])
    reader_group(24 << 20, 1_000_000_000)
    assert reader._io_limit(11) == ()  # one reading: nothing to weigh yet
    now[0] += 2.0
    reader_group(24 << 20, 1_000_000_000 + 2 * 24_700_000)
    assert reader._io_limit(11) == (("an I/O limit", "of 24 MiB/s of reads on disk 254:0 (cgroup `kame-reader-10`, one "
                                     "the process is not in): it read 23.6 MiB/s between reads, 98% of the limit"),)
    now[0] += 2.0
    reader_group(1 << 30, 1_000_000_000 + 4 * 24_700_000)  # the twin's 1 GiB/s cap: far above what it reads
    assert reader._io_limit(11) == ()
    from dflash_diag.analysis.settings import control_effect
    assert control_effect("an I/O limit").startswith("the kernel lets its group read or write only that much")


def test_a_block_io_limit_on_cgroup_v2_is_read_from_io_max_and_io_stat(tmp_path: Path) -> None:
    from dflash_diag.model.sched import io_limit_binding
    from dflash_diag.sources.sched import read_cgroup_io

    _cgroup_files(tmp_path, "job", {"io.max": "254:0 rbps=max wbps=max riops=200 wiops=max\n",
                                    "io.stat": "254:0 rbytes=10 wbytes=0 rios=5000 wios=0 dbytes=0 dios=0\n"})
    (before,) = read_cgroup_io((2, [tmp_path / "job"]))
    assert (before.device, before.what, before.limit_per_s, before.done) == ("254:0", "read ops", 200, 5000)
    (tmp_path / "job" / "io.stat").write_text("254:0 rbytes=10 wbytes=0 rios=5398 wios=0 dbytes=0 dios=0\n")
    (after,) = read_cgroup_io((2, [tmp_path / "job"]))
    assert io_limit_binding(before, after, 2.0) == ("200 reads a second on disk 254:0",
                                                    "it made 199 reads a second between reads, 100% of the limit")
    assert io_limit_binding(before, after, 4.0) is None  # 50% of the limit: not bound


def test_a_childs_fanotify_permission_watch_is_read_and_its_notifications_are_not(tmp_path: Path) -> None:
    """Batch 19's scanner child marks the spool with FAN_OPEN_PERM: every open of the loader waits for its answer.
    Its twin's FAN_OPEN notifications wait for nothing: not said."""
    import os

    from dflash_diag.sources.sched import children_permission_watches

    for pid in (10, 11):
        (tmp_path / str(pid) / "fd").mkdir(parents=True)
        (tmp_path / str(pid) / "fdinfo").mkdir()
    (tmp_path / "11" / "comm").write_text("python\n")
    os.symlink("anon_inode:[fanotify]", tmp_path / "11" / "fd" / "3")
    line = "fanotify ino:{ino:x} sdev:fd00001 mflags:0 mask:{mask:x} ignored_mask:0 fhandle-bytes:8 fhandle-type:1\n"
    info = "pos:\t0\nflags:\t02\nmnt_id:\t15\nfanotify flags:10 event-flags:0\n"
    (tmp_path / "11" / "fdinfo" / "3").write_text(info + line.format(ino=2293810, mask=0x08010000))
    assert children_permission_watches(10, (11,), tmp_path) == (
        "fanotify on inode 2293810, held by its child 11 (`python`): FAN_OPEN_PERM",)
    (tmp_path / "11" / "fdinfo" / "3").write_text(info + line.format(ino=2293810, mask=0x08000020))  # FAN_OPEN
    assert children_permission_watches(10, (11,), tmp_path) == ()


_LOCKER = """
import ctypes, mmap, sys, time
libc = ctypes.CDLL(None, use_errno=True)
# mlockall(MCL_CURRENT | MCL_FUTURE) for 'future', MCL_CURRENT alone for 'current'
ok = libc.mlockall(1 | (2 if sys.argv[1] == "future" else 0)) == 0
print("ok" if ok else f"no {ctypes.get_errno()}", flush=True)
while True:  # a fresh 16 MiB mapping every 0.1 s: locked and faulted in when made under MCL_FUTURE
    m = mmap.mmap(-1, 16 << 20)
    time.sleep(0.05)
    m.close()
    time.sleep(0.05)
"""


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["future", "current"])
def test_a_peer_that_locks_each_new_mapping_says_so_and_one_locked_once_does_not(mode: str) -> None:
    """mlockall(MCL_FUTURE): the writer's locked memory rises and falls with its mappings between reads, and the
    peer reads as locking them; MCL_CURRENT at start-up alone locks once, which costs nothing later: not said."""
    writer = subprocess.Popen([sys.executable, "-c", _LOCKER, mode], stdout=subprocess.PIPE, text=True)
    reader_proc = None
    try:
        assert writer.stdout is not None
        said = writer.stdout.readline().strip()
        if said != "ok":
            pytest.skip(f"this process may not lock memory ({said})")
        reader_proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.buffer.read(1)"],
                                       stdin=writer.stdout)
        writer.stdout.close()
        reader = peers.PeerReader(reader_proc.pid, dumper=lambda pid: None)
        controls: list[tuple[str, str]] = []
        for _ in range(12):  # doctor's 2 Hz over a window, faster
            (wait,) = reader.read(_wait_blocked(reader_proc.pid))
            controls = list(wait.peers[0].controls)
            time.sleep(0.07)
    finally:
        for p in (writer, reader_proc):
            if p is not None:
                p.kill()
                p.wait()
    locked = [value for name, value in controls if name == "locked memory"]
    if mode == "future":
        assert locked and "rising and falling with its mappings" in locked[0], controls
    else:
        assert not locked, controls


_LIMITED = """
import resource, sys, time
resource.setrlimit(resource.RLIMIT_CPU, (int(sys.argv[1]), int(sys.argv[1]) + 1))
end = time.process_time() + 0.7
while time.process_time() < end:  # 0.7 s of CPU: over a quarter of 2 s, far from 100 s
    pass
print("ok", flush=True)
time.sleep(60)
"""


@pytest.mark.slow
@pytest.mark.parametrize("limit", ["2", "100"])
def test_a_peers_cpu_time_limit_is_said_where_it_will_be_reached(limit: str) -> None:
    """A writer under RLIMIT_CPU (a sandbox's `ulimit -t`): the kernel ends it with SIGXCPU at that much CPU time,
    so a long-lived worker under it is killed and started again. Said where it has used a quarter of it (2 s), not
    where the limit is one it does not near (100 s: the look-alike)."""
    writer = subprocess.Popen([sys.executable, "-c", _LIMITED, limit], stdout=subprocess.PIPE, text=True)
    reader_proc = None
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "ok"
        reader_proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.buffer.read(1)"],
                                       stdin=writer.stdout)
        writer.stdout.close()
        (wait,) = peers.PeerReader(reader_proc.pid, dumper=lambda pid: None).read(_wait_blocked(reader_proc.pid))
    finally:
        for p in (writer, reader_proc):
            if p is not None:
                p.kill()
                p.wait()
    limits = [value for name, value in wait.peers[0].controls if name == "a CPU-time limit"]
    if limit == "2":
        assert len(limits) == 1 and limits[0].startswith("of 2 s (hard 3 s), 0."), wait.peers[0].controls
    else:
        assert limits == [], wait.peers[0].controls


def test_the_kernels_tcp_accounting_is_parsed_and_said_only_where_it_held_the_sender_back() -> None:
    import struct

    from dflash_diag.analysis.peers import sender_limit_text
    from dflash_diag.model.sched import TcpSender
    from dflash_diag.sources.sock_diag import parse_info_reply, parse_tcp_info

    info = bytearray(192)
    struct.pack_into("=I", info, 68, 120)  # rtt 120 us
    struct.pack_into("=Q", info, 112, (1 << 64) - 1)  # no pacing cap
    struct.pack_into("=QQQ", info, 168, 1_000_000, 800_000, 0)  # busy 1 s, 0.8 s of it the receiver's window
    parsed = parse_tcp_info(bytes(info))
    assert parsed is not None and parsed.rtt_us == 120 and parsed.max_pacing_rate_bytes_s is None
    assert parsed.rwnd_limited_us == 800_000 and parse_tcp_info(bytes(40)) is None
    # An older kernel's shorter struct: the fields it lacks are None, not read past its end.
    old = parse_tcp_info(bytes(info[:104]))
    assert old is not None and old.pacing_rate_bytes_s is None and old.busy_us is None
    # A reply: netlink header, the socket's message, then the INET_DIAG_INFO attribute; an error reply is None.
    body = bytes(72) + struct.pack("=HH", 4 + len(info), 2) + bytes(info)
    reply = struct.pack("=IHHII", 16 + len(body), 20, 0, 1, 0) + body
    assert parse_info_reply(reply) == parsed
    assert parse_info_reply(struct.pack("=IHHII", 36, 2, 0, 1, 0) + bytes(20)) is None

    def sender(cap: int | None, busy: float, rwnd: float, sndbuf: float) -> TcpSender:
        return TcpSender(max_pacing_rate_bytes_s=cap, pacing_rate_bytes_s=None, busy_ms=busy, rwnd_limited_ms=rwnd,
                         sndbuf_limited_ms=sndbuf)

    assert "receive window 80% of the time it had data to send" in sender_limit_text(sender(None, 1000, 800, 0))
    assert "its own send buffer 60%" in sender_limit_text(sender(None, 1000, 100, 600))
    assert sender_limit_text(sender(None, 1000, 300, 300)) == ""  # held back less than half the time: not said
    assert sender_limit_text(sender(None, 0, 0, 0)) == sender_limit_text(None) == ""
