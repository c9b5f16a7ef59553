"""What the scheduler's readers cost (sources/sched.py, sources/peers.py), on a process shaped like the
oversubscription example (four pool threads, each torch.set_num_threads(8): ~40 OS threads).

1. Per call: one SchedReader sweep (every thread's status, the children, the cgroup, PSI, /proc/stat), the facts
   (environment, CPUs, maps; the environment as the process set it, from its memory: its first read parses libc's
   symbol table, once per libc file) and a PeerReader read (/proc/locks, the blocked threads' syscall) with the /proc sweep
   it needs: wall and CPU time of this process, median and p90 of --calls calls; and a PeerReader read of a thread
   blocked on a unix socket to a multiprocessing manager's server (sock_diag, the server's /proc/PID/io).
2. On the watched process: its throughput in alternating windows with the readers running at --speedup times their
   normal rates (sched 1 Hz, peers 2 Hz, facts every 10 s) and not running; the median of the per-pair ratios
   (on/off), in alternating order so a drift of the machine's load cancels.

  .venv/bin/python bench/sched_readers.py                    # CPU box: prints a markdown table and JSON
  .venv/bin/python bench/sched_readers.py --windows 6 --window-s 4 --speedup 20
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from dflash_diag.sources import live_environ, procfs
from dflash_diag.sources.configs import ConfigReader
from dflash_diag.sources.peers import PeerReader
from dflash_diag.sources.sched import (
    SchedReader,
    children_permission_watches,
    open_sync_files,
    parse_listen_overflows,
    read_connecting,
    read_os_facts,
    watched_entries,
)
from dflash_diag.sources.storage import StorageReader

WORKLOAD = r'''
import sys, threading, time, torch
counter = [0]
def member():
    torch.set_num_threads(8)
    w, x = torch.randn(192, 192), torch.randn(48, 192)
    while True:
        torch.tanh(x @ w)
        counter[0] += 1
for i in range(4):
    threading.Thread(target=member, daemon=True).start()
out = open(sys.argv[1], "w")
while True:
    time.sleep(0.1)
    out.seek(0); out.write(f"{counter[0]:020d}"); out.flush()
'''


# A client blocked on a multiprocessing manager's queue: its thread waits reading a unix socket whose other end is the
# manager's server process (the PeerReader's sock_diag lookup, the holders' descriptors, the server's /proc/PID/io).
MANAGED = r'''
import multiprocessing as mp
if __name__ == "__main__":
    manager = mp.Manager()
    print(manager._process.pid, flush=True)
    manager.Queue().get()
'''


# A reader blocked on a pseudo-terminal's master whose slave is its first child's stdout, beside three more children
# (each exits when the program's pipe to it closes): the PeerReader follows the pty to the child; a SchedReader sweep
# reads each child's threads, stat and autogroup.
PTY_READER = r'''
import os, pty, subprocess, sys
master, slave = pty.openpty()
kids = [subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE,
                         stdout=slave if i == 0 else subprocess.DEVNULL) for i in range(4)]
os.close(slave)
print(kids[0].pid, flush=True)
os.read(master, 1)
'''


# A sender blocked in sendall on a loopback TCP connection whose receiver (a child process) accepts and never reads:
# the PeerReader follows the sendto wait to the child and reads the sending socket's tcp_info (one exact
# socket-diagnostics request, no dump).
TCP_SENDER = r'''
import socket, subprocess, sys
server = subprocess.Popen([sys.executable, "-c",
    "import socket, sys, time; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(1); "
    "print(s.getsockname()[1], flush=True); c, _ = s.accept(); time.sleep(3600)"],
    stdout=subprocess.PIPE, text=True)
port = int(server.stdout.readline())
print(server.pid, flush=True)
client = socket.create_connection(("127.0.0.1", port))
client.sendall(b"x" * (256 << 20))
'''


def _tcp_sender_costs(calls: int) -> dict[str, dict[str, float]]:
    """The PeerReader's read of a thread blocked sending on a loopback TCP connection: the receiver looked up (a
    fresh reader each call) and known, each with the sender's tcp_info read."""
    proc = subprocess.Popen([sys.executable, "-c", TCP_SENDER], stdout=subprocess.PIPE, text=True)
    server_pid = 0
    try:
        assert proc.stdout is not None
        server_pid = int(proc.stdout.readline())
        found, known = _found_and_known(proc.pid, calls)
        return {
            "PeerReader read, a TCP receiver found (sock_diag, the sender's tcp_info; with the /proc sweep)": found,
            "PeerReader read, the TCP receiver known (the sender's tcp_info; with the /proc sweep)": known,
        }
    finally:
        proc.kill()
        proc.wait()
        if server_pid:  # the receiver outlives its killed sender
            with contextlib.suppress(ProcessLookupError):
                os.kill(server_pid, signal.SIGKILL)


def _pty_and_children_costs(calls: int) -> dict[str, dict[str, float]]:
    """The PeerReader's read of a thread blocked on a pty (the slave's holder found once, then known), and a
    SchedReader sweep of a process with four children (their schedstat, stat and autogroup)."""
    proc = subprocess.Popen([sys.executable, "-c", PTY_READER], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        proc.stdout.readline()
        found, known = _found_and_known(proc.pid, calls)
        kids = [int(k) for k in Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()]
        peers = PeerReader(proc.pid)
        return {
            "PeerReader read, a pty's other end found (fdinfo's tty-index, descriptors; with the /proc sweep)": found,
            "PeerReader read, the pty's other end known (with the /proc sweep)": known,
            "SchedReader sweep, a process with 4 children (their nice, session, autogroup)":
                _timed(SchedReader(proc.pid).sample, calls),
            # Once a window: every child's descriptors walked for a fanotify permission watch (none here: the cost
            # of looking), and a peer's CPU-cgroup read (the child in the same group: the common case, no quota).
            "children_permission_watches, 4 children (their descriptors)":
                _timed(lambda: children_permission_watches(proc.pid, kids), calls),
            "PeerReader's CPU-quota read of one peer (its cgroups against the process's)":
                _timed(lambda: peers._cpu_quota(kids[0]), calls),  # the one step timed alone
            # In a sweep, for each child that ran 50 ms since the sweep before: its descriptors, for the process's
            # own /proc entries (a memory telemetry child at work on it).
            "watched_entries, one child's descriptors (a busy child's, per sweep)":
                _timed(lambda: watched_entries(Path(f"/proc/{kids[0]}/fd"), proc.pid), calls),
        }
    finally:
        proc.kill()  # its children read EOF from their stdin and exit
        proc.wait()


def _connecting_costs(calls: int) -> dict[str, dict[str, float]]:
    """The listen-queue readers: the namespace's ListenOverflows (every sweep), and, in a sweep after it rose, the
    opening and listening sockets with the process's own among them (here: this process, six connections to a
    listener of backlog 1 that never accepts, four of them left opening)."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    clients = []
    try:
        for _ in range(6):
            c = socket.socket()
            c.setblocking(False)
            c.connect_ex(listener.getsockname())
            clients.append(c)
        time.sleep(0.1)
        pid = os.getpid()
        netstat = Path(f"/proc/{pid}/net/netstat")
        return {
            "ListenOverflows (the namespace's netstat, every sweep)":
                _timed(lambda: parse_listen_overflows(netstat.read_text()), calls),
            "read_connecting, 4 sockets opening to a full listener (a sweep after ListenOverflows rose)":
                _timed(lambda: read_connecting(pid, ()), calls),
        }
    finally:
        for c in clients:
            c.close()
        listener.close()


def _config_costs(calls: int, tmp: Path) -> dict[str, dict[str, float]]:
    """The configuration values a catalogued setting is read from: one key looked up in a 3 KiB TOML profile on the
    command line, parsed afresh (a new or changed file) and from the parse cached by its mtime (every later window)."""
    profile = tmp / "profile.toml"
    sections = [f"[section{k}]\n" + "".join(f"option_{k}_{j} = {j}\n" for j in range(12)) for k in range(12)]
    profile.write_text("".join(sections) + "[store]\nstatement_cache = 0\n")
    paths = (str(profile),)
    cached = ConfigReader()
    cached.lookup(paths, "statement_cache")
    return {
        "a configuration key's value, its file parsed (3 KiB TOML; a new or changed file)":
            _timed(lambda: ConfigReader().lookup(paths, "statement_cache"), calls),
        "a configuration key's value, the parse cached (every later window)":
            _timed(lambda: cached.lookup(paths, "statement_cache"), calls),
    }


def _unix_peer_costs(calls: int) -> dict[str, dict[str, float]]:
    """The PeerReader's read of a thread blocked on a unix socket: a fresh reader each call (the peer looked up
    through sock_diag and searched for among the descriptors), and one reader read again (the peer known: its
    stat, io and top frame cached)."""
    proc = subprocess.Popen([sys.executable, "-c", MANAGED], stdout=subprocess.PIPE, text=True)
    server_pid = 0
    try:
        assert proc.stdout is not None
        server_pid = int(proc.stdout.readline())
        found, known = _found_and_known(proc.pid, calls)
        return {
            "PeerReader read, a unix socket's peer found (sock_diag, descriptors; with the /proc sweep)": found,
            "PeerReader read, the unix socket's peer known (its stat and io; with the /proc sweep)": known,
        }
    finally:
        proc.kill()
        proc.wait()
        if server_pid:  # the manager's server outlives its killed client
            with contextlib.suppress(ProcessLookupError):
                os.kill(server_pid, signal.SIGKILL)


def _storage_costs(calls: int, tmp: Path) -> dict[str, dict[str, float]]:
    """A thread blocked opening a file (a FIFO with no writer, so the call stays blocked): its /proc reading without
    the storage reader, with it and its directory's settings known, and with a fresh reader each call (the path
    read from the process's memory, the directory's inode flags and the mounts read)."""
    spool = tmp / "spool"
    spool.mkdir()
    os.mkfifo(spool / "rec.fifo")
    proc = subprocess.Popen([sys.executable, "-c", "import sys; open(sys.argv[1], 'rb')", str(spool / "rec.fifo")])
    try:
        deadline = time.monotonic() + 20.0
        known = StorageReader(proc.pid)
        while time.monotonic() < deadline:
            sample = procfs.read_thread(proc.pid, proc.pid, storage=known)
            if sample is not None and sample.syscall_target:
                break
            time.sleep(0.05)
        return {
            "a blocked thread's /proc reading, no storage reader": _timed(
                lambda: procfs.read_thread(proc.pid, proc.pid), calls),
            "... with its call's file and its directory's settings, known": _timed(
                lambda: procfs.read_thread(proc.pid, proc.pid, storage=known), calls),
            "... with a fresh storage reader (path from memory, inode flags, mountinfo)": _timed(
                lambda: procfs.read_thread(proc.pid, proc.pid, storage=StorageReader(proc.pid)), calls),
        }
    finally:
        proc.kill()
        proc.wait()


def _found_and_known(pid: int, calls: int) -> tuple[dict[str, float], dict[str, float]]:
    """Once ``pid``'s blocked thread is followed to its peer: a fresh PeerReader's read each call (the peer looked
    up), and one reader's read again (the peer known)."""
    deadline = time.monotonic() + 20.0
    while time.monotonic() < deadline and not PeerReader(pid).read(procfs.read_threads(pid)):
        time.sleep(0.1)
    known = PeerReader(pid)
    return (_timed(lambda: PeerReader(pid).read(procfs.read_threads(pid)), calls),
            _timed(lambda: known.read(procfs.read_threads(pid)), calls))


def _timed(fn: Callable[[], object], calls: int) -> dict[str, float]:
    walls, cpus = [], []
    for _ in range(calls):
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    walls.sort()
    cpus.sort()
    return {"wall_ms_median": round(1e3 * statistics.median(walls), 3),
            "wall_ms_p90": round(1e3 * walls[int(0.9 * (len(walls) - 1))], 3),
            "cpu_ms_median": round(1e3 * statistics.median(cpus), 3)}


def _count(path: Path) -> int:
    try:
        return int(path.read_text() or 0)
    except (OSError, ValueError):
        return 0


def _window(path: Path, seconds: float) -> float:
    a, t0 = _count(path), time.monotonic()
    time.sleep(seconds)
    return (_count(path) - a) / (time.monotonic() - t0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--windows", type=int, default=6, help="pairs of on/off windows")
    parser.add_argument("--window-s", type=float, default=4.0)
    parser.add_argument("--speedup", type=float, default=10.0, help="the readers' rates times this in the on windows")
    parser.add_argument("--warmup-s", type=float, default=8.0)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="sched-bench-"))
    counter = tmp / "count"
    proc = subprocess.Popen([sys.executable, "-c", WORKLOAD, str(counter)])
    try:
        deadline = time.monotonic() + 180.0
        while _count(counter) == 0 and time.monotonic() < deadline:  # torch imported, the pools started
            time.sleep(0.5)
        time.sleep(args.warmup_s)
        pid = proc.pid
        threads = len(os.listdir(f"/proc/{pid}/task"))
        sched, peers, storage = SchedReader(pid), PeerReader(pid), StorageReader(pid)
        live_environ._libc_symbols.cache_clear()
        first_live = _timed(lambda: live_environ.read_live_environ(pid, lambda name: True), 1)
        per_call = {
            "read_live_environ, first (libc's symbol table parsed)": first_live,
            "read_live_environ (the environment in the process's memory)":
                _timed(lambda: live_environ.read_live_environ(pid, lambda name: True), args.calls),
            "SchedReader sweep": _timed(sched.sample, args.calls),
            "read_os_facts": _timed(lambda: read_os_facts(pid), max(10, args.calls // 10)),
            # Part of read_os_facts: each descriptor's fdinfo flags (the files open for synchronous writes).
            "open_sync_files (with the facts)": _timed(lambda: open_sync_files(pid), args.calls),
            "PeerReader read (with its /proc sweep)": _timed(lambda: peers.read(procfs.read_threads(pid)), args.calls),
            "/proc sweep alone (procfs.read_threads)": _timed(lambda: procfs.read_threads(pid), args.calls),
            **_unix_peer_costs(args.calls),
            **_tcp_sender_costs(args.calls),
            **_pty_and_children_costs(args.calls),
            **_connecting_costs(args.calls),
            **_config_costs(args.calls, tmp),
            **_storage_costs(args.calls, tmp),
        }
        stop = threading.Event()
        on = threading.Event()

        def readers() -> None:
            next_sched = next_peer = next_facts = time.monotonic()
            while not stop.is_set():
                if not on.wait(0.05):
                    continue
                now = time.monotonic()
                if now >= next_sched:
                    sched.sample()
                    next_sched = now + 1.0 / args.speedup
                if now >= next_peer:
                    peers.read(procfs.read_threads(pid, storage=storage))  # the sampler's sweep reads so
                    next_peer = now + 0.5 / args.speedup
                if now >= next_facts:
                    read_os_facts(pid)
                    next_facts = now + 10.0 / args.speedup
                time.sleep(max(0.0, min(next_sched, next_peer, next_facts) - time.monotonic()))

        worker = threading.Thread(target=readers, daemon=True)
        worker.start()
        ratios, on_rates, off_rates = [], [], []
        for i in range(args.windows):
            order = (True, False) if i % 2 == 0 else (False, True)
            rates = {}
            for state in order:
                (on.set if state else on.clear)()
                rates[state] = _window(counter, args.window_s)
            on.clear()
            on_rates.append(rates[True])
            off_rates.append(rates[False])
            if rates[False] > 0:
                ratios.append(rates[True] / rates[False])
        stop.set()
        worker.join(5)
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)  # the counter and the profile: this bench's own files
    result = {
        "command": "python bench/sched_readers.py " + " ".join(sys.argv[1:]),
        "machine": f"{platform.node()} ({os.cpu_count()} CPUs, {platform.machine()}), load average "
                   f"{os.getloadavg()[0]:.1f}",
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "watched_threads": threads,
        "per_call": per_call,
        "alternating": {"speedup": args.speedup, "pairs": len(ratios), "window_s": args.window_s,
                        "ratio_median": round(statistics.median(ratios), 3) if ratios else None,
                        "ratio_min": round(min(ratios), 3) if ratios else None,
                        "ratio_max": round(max(ratios), 3) if ratios else None,
                        "steps_per_s_on_median": round(statistics.median(on_rates), 1),
                        "steps_per_s_off_median": round(statistics.median(off_rates), 1)},
    }
    print("| reader | wall ms (median) | wall ms (p90) | CPU ms (median) |\n|---|---|---|---|")
    for name, row in per_call.items():
        print(f"| {name} | {row['wall_ms_median']} | {row['wall_ms_p90']} | {row['cpu_ms_median']} |")
    alt = result["alternating"]
    print(f"\nwatched process ({threads} threads): steps/s with the readers at {args.speedup:g}x their rates / without, "
          f"median of {alt['pairs']} alternating pairs: {alt['ratio_median']} (range {alt['ratio_min']}-{alt['ratio_max']})")
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
