"""The scheduler's view from /proc and the cgroup files: parsers on recorded kernel text, the cgroup v1 and v2
layouts on a file tree, and the readers on real processes (threads that switch, an environment, children)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from dflash_diag.model import NA
from dflash_diag.model.sched import parse_cpu_list
from dflash_diag.sources import sched

# Recorded from this machine's kernel (a 2-CPU VM) and from a cgroup v2 host.
STATUS = """Name:\tpython
Umask:\t0022
State:\tS (sleeping)
Tgid:\t4242
Threads:\t41
Cpus_allowed:\t3
Cpus_allowed_list:\t0-1
voluntary_ctxt_switches:\t3407
nonvoluntary_ctxt_switches:\t925
"""
PSI = "some avg10=98.51 avg60=80.81 avg300=33.63 total=133578466\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
CGROUP_V1 = "9:name=systemd:/\n4:memory:/process_api/91ee\n2:cpuacct:/\n1:cpu:/\n0::/\n"
CGROUP_V2 = "0::/system.slice/train.service\n"


def test_status_parses_switches_and_cpus() -> None:
    assert sched.parse_status(STATUS) == ("python", 3407, 925, "0-1")
    assert sched.parse_status("Name:\tpython\n") is None  # a kernel without the counts: nothing claimed


@pytest.mark.parametrize(("text", "cpus"), [("0-1", {0, 1}), ("0-3,8,10-11", {0, 1, 2, 3, 8, 10, 11}), ("5", {5}),
                                            ("", set()), ("x,2-1,3", {3})])
def test_cpu_lists(text: str, cpus: set[int]) -> None:
    assert parse_cpu_list(text) == cpus


def test_quota_files_of_both_versions() -> None:
    assert sched.parse_cpu_max("150000 100000\n") == 1.5
    assert isinstance(sched.parse_cpu_max("max 100000\n"), NA)
    assert sched.parse_cfs_quota("50000\n", "100000\n") == 0.5
    assert isinstance(sched.parse_cfs_quota("-1\n", "100000\n"), NA)
    assert sched.parse_flat_keyed("nr_periods 10\nnr_throttled 4\nthrottled_usec 900\nbad line here\n") == {
        "nr_periods": 10, "nr_throttled": 4, "throttled_usec": 900}


def test_pressure_and_cgroup_paths_and_procs_running() -> None:
    assert sched.parse_pressure(PSI) == (133578466, 0)
    assert sched.parse_pressure("some avg10=1.00 total=7\n") == (7, None)
    assert sched.parse_pressure("garbage\n") is None
    assert sched.parse_cgroup_file(CGROUP_V1) == ("/", "/")
    assert sched.parse_cgroup_file(CGROUP_V2) == ("/system.slice/train.service", None)
    assert sched.parse_procs_running("cpu  1 2 3\nprocs_running 7\nprocs_blocked 0\n") == 7


def _proc_tree(tmp: Path, pid: int, cgroup: str) -> Path:
    proc = tmp / "proc"
    (proc / str(pid)).mkdir(parents=True)
    (proc / str(pid) / "cgroup").write_text(cgroup)
    (proc / "pressure").mkdir()
    for resource in ("cpu", "memory", "io"):
        (proc / "pressure" / resource).write_text("some avg10=0.00 total=100\nfull avg10=0.00 total=50\n")
    return proc


def test_cgroup_v2_quota_is_the_smallest_of_the_group_and_its_ancestors(tmp_path: Path) -> None:
    proc = _proc_tree(tmp_path, 42, CGROUP_V2)
    root = tmp_path / "cg"
    group = root / "system.slice" / "train.service"
    group.mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpu memory io\n")
    (root / "system.slice" / "cpu.max").write_text("200000 100000\n")  # 2 CPUs for the slice
    (group / "cpu.max").write_text("max 100000\n")  # the service itself: unlimited
    (group / "cpu.stat").write_text("usage_usec 5\nnr_periods 100\nnr_throttled 40\nthrottled_usec 2500000\n")
    (group / "memory.pressure").write_text("some avg10=3.00 total=9000\nfull avg10=0.00 total=10\n")
    got = sched.read_cgroup_cpu(42, proc_root=proc, cgroup_root=root)
    assert not isinstance(got, NA)
    assert got.version == 2 and got.quota_cores == 2.0
    assert (got.periods, got.throttled_periods, got.throttled_us) == (100, 40, 2_500_000)
    pressure = {(p.resource, p.scope): p for p in sched.read_pressure(42, proc_root=proc, cgroup_root=root)}
    assert pressure[("memory", "cgroup")].some_us == 9000  # the group's own, where the kernel keeps it
    assert pressure[("cpu", "system")].some_us == 100  # else the machine's


def test_cgroup_v1_in_a_namespace_reads_the_mount_root(tmp_path: Path) -> None:
    proc = _proc_tree(tmp_path, 7, "4:cpu,cpuacct:/docker/abc\n")
    root = tmp_path / "cg"
    mount = root / "cpu,cpuacct"
    mount.mkdir(parents=True)  # the path the kernel names does not exist here: the namespace's root is the mount
    (mount / "cpu.cfs_quota_us").write_text("150000\n")
    (mount / "cpu.cfs_period_us").write_text("100000\n")
    (mount / "cpu.stat").write_text("nr_periods 20\nnr_throttled 5\nthrottled_time 3000000000\n")
    got = sched.read_cgroup_cpu(7, proc_root=proc, cgroup_root=root)
    assert not isinstance(got, NA)
    assert got.version == 1 and got.quota_cores == 1.5 and got.throttled_us == 3_000_000  # ns -> µs


def test_no_cgroup_controller_is_a_value(tmp_path: Path) -> None:
    proc = _proc_tree(tmp_path, 9, "")
    assert isinstance(sched.read_cgroup_cpu(9, proc_root=proc, cgroup_root=tmp_path / "none"), NA)


@pytest.mark.slow
def test_a_real_sweep_sees_threads_switch_and_children() -> None:
    stop = threading.Event()
    tids: list[int] = []

    def ping() -> None:
        tids.append(threading.get_native_id())
        while not stop.is_set():
            time.sleep(0.001)  # gives up its CPU each time: voluntary switches

    t = threading.Thread(target=ping, daemon=True)
    t.start()
    # A background child: niced, in a session of its own (a scheduling group of its own under autogroup).
    child = subprocess.Popen([sys.executable, "-c", "import os, time; os.nice(5); print(flush=True); time.sleep(30)"],
                             start_new_session=True, stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None
        child.stdout.readline()
        reader = sched.SchedReader(os.getpid())
        time.sleep(0.2)
        first = reader.sample()
        time.sleep(0.5)
        second = reader.sample()
    finally:
        stop.set()
        child.kill()
        child.wait()
        t.join(10)
    a = {x.tid: x for x in first.tasks}
    b = {x.tid: x for x in second.tasks}
    assert b[tids[0]].voluntary_switches > a[tids[0]].voluntary_switches + 50
    assert b[tids[0]].cpus_allowed == a[tids[0]].cpus_allowed != ""
    assert child.pid in {c.pid for c in second.children}
    assert second.children_listed >= 1 and second.monotonic_s > first.monotonic_s
    kid = next(c for c in second.children if c.pid == child.pid)
    assert (kid.nice, kid.policy, kid.session) == (5, 0, child.pid)
    facts = sched.read_os_facts(os.getpid())
    assert facts.session == os.getsid(0) != kid.session
    if not Path("/proc/self/autogroup").exists():  # a kernel built without autogroup scheduling
        return
    assert facts.autogroup_enabled is not None
    # setsid gives the child an autogroup of its own. The process's may be the kernel's default group (its session
    # never called setsid since init's, as on a CI runner): the kernel prints nothing for it, read as autogroup-0.
    own_printed = bool(Path("/proc/self/autogroup").read_text().strip())
    assert facts.autogroup.startswith("autogroup-") and (facts.autogroup != sched.DEFAULT_AUTOGROUP) == own_printed
    assert kid.autogroup.startswith("autogroup-") and kid.autogroup not in (facts.autogroup, sched.DEFAULT_AUTOGROUP)


def test_autogroup_files_are_read_and_anything_else_is_a_missing_value(tmp_path: Path) -> None:
    (tmp_path / "7").mkdir()
    (tmp_path / "7" / "autogroup").write_text("/autogroup-812 nice 0\n")
    (tmp_path / "8").mkdir()
    (tmp_path / "8" / "autogroup").write_text("garbage\n")
    (tmp_path / "10").mkdir()
    (tmp_path / "10" / "autogroup").write_text("")  # a task in the kernel's default group: it prints nothing
    assert sched.read_autogroup(7, tmp_path) == "autogroup-812"
    assert sched.read_autogroup(10, tmp_path) == sched.DEFAULT_AUTOGROUP == "autogroup-0"
    assert sched.read_autogroup(8, tmp_path) == sched.read_autogroup(9, tmp_path) == ""
    for text, value in (("1\n", True), ("0\n", False), ("2\n", None), ("", None)):
        (tmp_path / "enabled").write_text(text)
        assert sched.read_autogroup_enabled(tmp_path / "enabled") is value
    assert sched.read_autogroup_enabled(tmp_path / "absent") is None


@pytest.mark.slow
def test_facts_keep_known_variables_only_and_what_only_children_have() -> None:
    script = ("import os, subprocess, sys, time\n"
              "os.environ['MKL_NUM_THREADS'] = '6'\n"
              "os.environ['OMP_NUM_THREADS'] = '3'\n"
              "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'],\n"
              "                     env={**os.environ, 'OPENBLAS_NUM_THREADS': '2'})\n"
              "print(c.pid, flush=True); time.sleep(30)\n")
    env = {**os.environ, "OMP_NUM_THREADS": "8", "CUDA_LAUNCH_BLOCKING": "1", "HF_TOKEN": "hf_abcdefghijklmnop",
           "TORCH_LOGS": "/home/someone/secret path/x"}
    proc = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        proc.stdout.readline()
        deadline = time.monotonic() + 10.0
        while True:  # /proc/PID/task/TID/children is not atomic (the kernel says so): a loaded box may miss one once
            facts = sched.read_os_facts(proc.pid)
            if time.monotonic() > deadline or any(e.name == "OPENBLAS_NUM_THREADS" for e in facts.env or ()):
                break
            time.sleep(0.1)
    finally:
        proc.kill()
        proc.wait()
    assert isinstance(facts.env, tuple)
    shown = {e.name: (e.value, e.where) for e in facts.env}
    assert shown["CUDA_LAUNCH_BLOCKING"] == ("1", "process")
    assert shown["TORCH_LOGS"] == ("<set>", "process")  # a value of an odd shape: its name only
    # Set or changed by the program itself (os.environ): only its memory has them, not /proc/PID/environ.
    assert shown["MKL_NUM_THREADS"] == ("6", "program")
    assert shown["OMP_NUM_THREADS"] == ("3", "program")
    assert shown["OPENBLAS_NUM_THREADS"] == ("2", "children (1)")  # given to the child alone
    # Each child's own environment, whether or not the process has the variable too.
    kid = {(e.name, e.value) for e in facts.children_env}
    assert {("OPENBLAS_NUM_THREADS", "2"), ("MKL_NUM_THREADS", "6"), ("OMP_NUM_THREADS", "3")} <= kid
    assert len({e.where for e in facts.children_env}) == 1 and facts.children_env[0].where.startswith("child ")
    assert "HF_TOKEN" not in shown and all("hf_abc" not in v for v, _ in shown.values())
    assert facts.machine_cpus >= 1 and facts.process_cpu_count >= 1 and facts.process_cpus


def test_a_comm_that_is_a_secret_is_redacted() -> None:
    from dflash_diag.model.sched import SchedSample, TaskSched
    from dflash_diag.sources.redaction import ProcessRedactor

    redactor = ProcessRedactor(["s3cr3t-value"])
    sample = SchedSample(monotonic_s=1.0, tasks=(TaskSched(1, "s3cr3t-value", 1, 1, "0"),))
    assert "s3cr3t" not in sched.redacted_sample(sample, redactor.text).tasks[0].comm


@pytest.mark.parametrize(("text", "mode"), [("always [madvise] never\n", "madvise"), ("[always] madvise never", "always"),
                                           ("always madvise [never]", "never"), ("", ""), ("garbage", "")])
def test_the_machines_huge_page_mode(text: str, mode: str, tmp_path: Path) -> None:
    assert sched.parse_thp_mode(text) == mode
    (tmp_path / "enabled").write_text(text)
    assert sched.read_os_facts(os.getpid(), thp=tmp_path / "enabled").thp_mode == mode


@pytest.mark.parametrize(("text", "word"), [("tsc\n", "tsc"), ("hpet", "hpet"), ("", ""), ("a b\n", ""),
                                            ("x" * 40, "")])
def test_the_clock_source_is_one_word_or_unknown(text: str, word: str, tmp_path: Path) -> None:
    assert sched.parse_clocksource(text) == word
    (tmp_path / "current_clocksource").write_text(text)
    facts = sched.read_os_facts(os.getpid(), clocksource=tmp_path / "current_clocksource")
    assert facts.clocksource == word
    assert sched.read_os_facts(os.getpid(), clocksource=tmp_path / "missing").clocksource == ""


@pytest.mark.parametrize(("text", "ns"), [("50000\n", 50_000), ("10000000", 10_000_000), ("", None), ("-1", None),
                                          ("9" * 13, None)])
def test_the_timer_slack_is_a_bounded_number_or_unknown(text: str, ns: int | None) -> None:
    assert sched.parse_timerslack(text) == ns


def test_the_timer_slack_of_a_live_process_is_read() -> None:
    assert sched.read_os_facts(os.getpid()).timerslack_ns == 50_000  # this test process: the kernel's default


def test_the_processs_io_counters_are_parsed_and_read_live() -> None:
    text = "rchar: 4096\nwchar: 10\nsyscr: 3\nsyscw: 1\nread_bytes: 8192\nwrite_bytes: 0\ncancelled_write_bytes: 0\n"
    io = sched.parse_io(text)
    assert io is not None and (io.rchar, io.read_bytes, io.syscr, io.wchar, io.syscw) == (4096, 8192, 3, 10, 1)
    assert sched.parse_io("rchar: 1\n") is None and sched.parse_io("") is None
    older = sched.parse_io("rchar: 4\nsyscr: 1\nread_bytes: 0\n")  # no write counters: unknown, not zero
    assert older is not None and older.wchar is None and older.syscw is None
    reader = sched.SchedReader(os.getpid())
    before = reader().io
    for _ in range(50):
        os.write(2, b"")  # an empty write is still a write system call
    after = reader().io
    assert before is not None and after is not None and before.rchar > 0  # this process has read its own files
    assert before.syscw is not None and after.syscw is not None and after.syscw - before.syscw >= 50


def test_files_open_for_synchronous_writes_are_read_from_fdinfo(tmp_path: Path) -> None:
    """This process opens a ledger with O_DSYNC, a log with O_SYNC and a plain file: the facts name the first two
    by file name, with their flag, and not the plain one."""
    import os

    from dflash_diag.sources.sched import open_sync_files, parse_fdinfo_flags, sync_flag_name

    fds = [os.open(tmp_path / name, os.O_WRONLY | os.O_CREAT | flag, 0o600)
           for name, flag in (("ledger.jsonl", os.O_DSYNC), ("audit.log", os.O_SYNC), ("plain.log", 0))]
    try:
        found = open_sync_files(os.getpid())
    finally:
        for fd in fds:
            os.close(fd)
    assert "ledger.jsonl (O_DSYNC)" in found and "audit.log (O_SYNC)" in found
    assert not any(f.startswith("plain.log") for f in found)
    assert parse_fdinfo_flags("pos:\t0\nflags:\t0110001\nmnt_id:\t25\n") == 0o110001
    assert parse_fdinfo_flags("pos:\t0\n") is None
    assert sync_flag_name(0o100001) == ""
    assert open_sync_files(2**22 + 7) == ()  # no such process: nothing, no error


def test_the_kernel_controls_away_from_their_defaults_are_read_from_status() -> None:
    text = ("Name:\tpython\nVmLck:\t  204800 kB\nNoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t6\nTHP_enabled:\t0\n"
            "Speculation_Store_Bypass:\tthread force mitigated\nSpeculationIndirectBranch:\tconditional enabled\n")
    assert sched.parse_process_controls(text) == (("seccomp filters", "6"), ("locked memory", "200 MiB"),
                                                 ("transparent huge pages",
                                                  "disabled for the process"),
                                                 ("speculative store bypass", "thread force mitigated"))
    defaults = ("VmLck:\t       0 kB\nSeccomp:\t0\nSeccomp_filters:\t0\nTHP_enabled:\t1\nSpeculation_Store_Bypass:\tthread vulnerable\n"
                "SpeculationIndirectBranch:\tconditional enabled\n")
    assert sched.parse_process_controls(defaults) == () and sched.parse_process_controls("") == ()
    assert sched.parse_process_controls("TracerPid:\t0\n") == ()  # no tracer
    assert sched.parse_process_controls("TracerPid:\t4321\n") == (("a ptrace tracer", "process 4321"),)
    assert sched.read_os_facts(os.getpid()).controls == ()  # this test process: the kernel's defaults


def test_a_tracer_of_the_tools_own_is_dropped_and_anothers_is_named(tmp_path: Path) -> None:
    """Status' TracerPid: a tracer descending from the reading process (its py-spy, its gdb) is its own look, not a
    control of the process; another's is named by its comm."""
    for pid, ppid, comm in ((50, 1, "strace"), (60, 40, "py-spy"), (40, 30, "dflash-diag")):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(f"{pid} ({comm}) S {ppid} {pid} {pid} 0 -1 0" + " 0" * 44 + "\n")
        (tmp_path / str(pid) / "comm").write_text(comm + "\n")
    controls = (("seccomp filters", "2"), ("a ptrace tracer", "process 50"))
    assert sched.without_own_tracers(controls, tmp_path, own_pid=30) == (
        ("seccomp filters", "2"), ("a ptrace tracer", "process 50 (`strace`)"))
    assert sched.without_own_tracers((("a ptrace tracer", "process 60"),), tmp_path, own_pid=30) == ()


def test_the_processs_own_file_watches_that_fire_per_call_are_read_with_what_they_watch(tmp_path: Path) -> None:
    """This process watches a data directory with inotify for reads and opens (every pread of a file in it queues
    an event), and another for creations only: the first is named by the open file it holds there, the second is
    not listed (no event per read or write)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    data, other = tmp_path / "archive", tmp_path / "drop"
    data.mkdir()
    other.mkdir()
    (data / "gauges.bin").write_bytes(b"\0" * 64)
    fd = libc.inotify_init1(os.O_CLOEXEC)
    assert fd >= 0
    held = os.open(data / "gauges.bin", os.O_RDONLY)
    try:
        assert libc.inotify_add_watch(fd, str(data).encode(), 0x1 | 0x20) >= 0  # IN_ACCESS | IN_OPEN
        assert libc.inotify_add_watch(fd, str(other).encode(), 0x100) >= 0  # IN_CREATE
        watches = sched.file_watches(os.getpid())
        assert watches == ("inotify on the directory of gauges.bin: IN_ACCESS|IN_OPEN",)
        assert sched.read_os_facts(os.getpid()).watches == watches
    finally:
        os.close(held)
        os.close(fd)
    assert sched.file_watches(os.getpid()) == ()


def test_watch_lines_and_their_per_call_events_are_parsed() -> None:
    text = ("pos:\t0\nflags:\t02000000\nmnt_id:\t30\n"
            "inotify wd:1 ino:1a2b sdev:800001 mask:31 ignored_mask:0 fhandle-bytes:8 fhandle-type:1 f_handle:2b1a\n"
            "inotify wd:2 ino:ff sdev:800001 mask:180 ignored_mask:0\n")
    assert sched.parse_watches(text) == [("inotify", 0x1a2b, 0x31), ("inotify", 0xff, 0x180)]
    assert sched.per_call_events("inotify", 0x31) == "IN_ACCESS|IN_CLOSE_NOWRITE|IN_OPEN"
    assert sched.per_call_events("inotify", 0x180) == ""  # IN_MOVED_TO | IN_CREATE: not per read or write
    assert sched.per_call_events("fanotify", 0x10000) == "FAN_OPEN_PERM"
    assert sched.parse_watches("") == []


def test_a_small_cached_read_is_timed_as_the_yardstick_of_kernel_time_per_call(tmp_path: Path) -> None:
    cost = sched.read_call_cost_us()
    assert cost is not None and 0.0 < cost < 100.0  # microseconds: a fraction of one on a quiet box
    assert sched.read_call_cost_us(str(tmp_path / "missing")) is None
    facts = sched.read_os_facts(os.getpid())
    assert facts.read_call_us is not None and facts.read_call_us > 0.0


# A local service and its client: `per_request` opens a new connection for every request (keep-alive off), else one
# connection serves them all. The server closes a connection when its client does.
_SERVICE = """
import socketserver
class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        while self.request.recv(64):
            self.request.sendall(b'ok')
server = socketserver.ThreadingTCPServer(('127.0.0.1', 0), Handler)
server.daemon_threads = True
print(server.server_address[1], flush=True)
server.serve_forever()
"""
_CLIENT = """
import socket, sys, time
port, per_request = int(sys.argv[1]), sys.argv[2] == "1"
conn = None
while True:
    if conn is None:
        conn = socket.create_connection(('127.0.0.1', port))
    conn.sendall(b'q'); conn.recv(8)
    time.sleep(0.002)  # ~300 requests a second, as a feature lookup per item might make
    if per_request:
        conn.close(); conn = None
"""


@pytest.mark.slow
@pytest.mark.parametrize("per_request", [True, False], ids=["new-connection-each", "keep-alive"])
def test_connections_closed_in_the_last_minute_to_an_endpoint_the_process_uses(per_request: bool) -> None:
    """A client that opens a connection per request leaves them in TIME_WAIT (60 s on Linux): hundreds to its
    service's endpoint within a few seconds, said with that endpoint; one that keeps its connection leaves none."""
    service = subprocess.Popen([sys.executable, "-c", _SERVICE], stdout=subprocess.PIPE, text=True)
    client = None
    try:
        assert service.stdout is not None
        port = int(service.stdout.readline())
        client = subprocess.Popen([sys.executable, "-c", _CLIENT, str(port), "1" if per_request else "0"])
        found: tuple[tuple[str, int], ...] = ()
        deadline = time.monotonic() + 15.0
        while time.monotonic() < deadline:
            time.sleep(0.5)
            found = sched.closed_connections(client.pid, links=sched.descriptor_links(client.pid))
            if found or (not per_request and time.monotonic() > deadline - 12.0):
                break
    finally:
        for p in (client, service):
            if p is not None:
                p.kill()
                p.wait()
    if per_request:
        assert found and found[0][0] == f"127.0.0.1:{port}" and found[0][1] >= sched.TIME_WAIT_MIN, found
    else:
        assert found == ()


def test_tcp_lines_and_addresses_are_parsed() -> None:
    text = ("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
            "   0: 0100007F:873B 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 3262140 1\n"
            "   1: 0100007F:9FC2 0100007F:873B 06 00000000:00000000 03:00000ABC 00000000     0        0 0 3\n"
            "garbage\n")
    assert sched.parse_tcp_lines(text) == [("0100007F:873B", "00000000:0000", "0A", "3262140"),
                                           ("0100007F:9FC2", "0100007F:873B", "06", "0")]
    assert sched.tcp_addr_text("0100007F:873B") == "127.0.0.1:34619"


def test_a_service_its_child_listens_on_counts_while_no_request_is_open(tmp_path: Path) -> None:
    """Between two requests a client without keep-alive holds no connection: the endpoint still counts when one of
    the process's children listens on it (its feature service), read from the child's descriptors."""
    header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    rows = ["   0: 0100007F:873B 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 555 1\n"]
    rows += [f"   {i}: 0100007F:{0x9000 + i:04X} 0100007F:873B 06 00000000:00000000 03:00000ABC 00000000 0 0 0 3\n"
             for i in range(1, 151)]
    (tmp_path / "10" / "net").mkdir(parents=True)
    (tmp_path / "10" / "net" / "tcp").write_text(header + "".join(rows))
    (tmp_path / "10" / "fd").mkdir()
    (tmp_path / "11" / "fd").mkdir(parents=True)
    os.symlink("socket:[555]", tmp_path / "11" / "fd" / "3")
    assert sched.closed_connections(10, tmp_path, links=[], children=(11,)) == (("127.0.0.1:34619", 150),)
    assert sched.closed_connections(10, tmp_path, links=[], children=()) == ()  # nobody here uses it
    # The connection the descriptors named closed before the table's walk reached it: the established sockets are
    # asked again, with the descriptors read again (socket 556 now), until one is connected to the endpoint.
    os.symlink("socket:[556]", tmp_path / "10" / "fd" / "4")
    asked: list[set[str]] = []

    def established(inodes: set[str]) -> set[str]:
        asked.append(inodes)
        return {"0100007F:873B"} if len(asked) == 2 else set()

    assert sched.closed_connections(10, tmp_path, links=[("3", "socket:[554]")], established=established) == (
        ("127.0.0.1:34619", 150),)
    assert asked == [{"556"}, {"556"}]
    # The kernel cannot be asked (None) or never shows one: nothing is said.
    assert sched.closed_connections(10, tmp_path, links=[], established=lambda _: None) == ()
    assert sched.closed_connections(10, tmp_path, links=[], established=lambda _: set()) == ()


def test_a_dump_of_established_sockets_is_read_only_where_every_length_holds() -> None:
    """The kernel's dump of established TCP sockets: inode and remote in /proc's spelling, its end, and an error
    reply or a length that overruns the bytes read as nothing."""
    import socket
    import struct

    from dflash_diag.sources import sock_diag
    msg = struct.pack("=BBBB", socket.AF_INET, 1, 0, 0) + struct.pack(">HH", 40000, 0x873B)
    msg += bytes(16) + bytes([127, 0, 0, 1]) + bytes(12) + struct.pack("=IQIIIII", 0, 0, 0, 0, 0, 1000, 557)
    one = struct.pack("=IHHII", 16 + len(msg), sock_diag.SOCK_DIAG_BY_FAMILY, 2, 1, 0) + msg
    done = struct.pack("=IHHII", 20, sock_diag.NLMSG_DONE, 2, 1, 0) + bytes(4)
    assert sock_diag.parse_dump(one, socket.AF_INET) == ([("557", "0100007F:873B")], False)
    assert sock_diag.parse_dump(one + done, socket.AF_INET) == ([("557", "0100007F:873B")], True)
    assert sock_diag.parse_dump(one[:-3], socket.AF_INET) == (None, True)
    error = struct.pack("=IHHII", 20, sock_diag.NLMSG_ERROR, 0, 1, 0) + bytes(4)
    assert sock_diag.parse_dump(error, socket.AF_INET) == (None, True)


def test_the_established_sockets_are_asked_of_the_kernel_in_both_families() -> None:
    import socket

    from dflash_diag.sources import sock_diag
    with socket.create_server(("127.0.0.1", 0)) as server, socket.create_connection(server.getsockname()) as conn:
        inode = str(os.fstat(conn.fileno()).st_ino)
        port = server.getsockname()[1]
        assert sock_diag.established_remotes({inode}) == {f"0100007F:{port:04X}"}
        assert sock_diag.established_remotes({"1"}) == set()
    assert sock_diag.same_network_namespace(os.getpid())


def test_a_busy_childs_descriptors_on_the_processs_own_proc_entries_are_read() -> None:
    """A child that keeps /proc/<parent>/smaps_rollup open while it computes is read as at work on the process;
    before it has run since the sweep before, its descriptors are not looked at."""
    code = ("import os, sys, time\n"
            "f = open(f'/proc/{os.getppid()}/smaps_rollup')\n"
            "g = open(f'/proc/{os.getppid()}/task/{os.getppid()}/stat')\n"
            "print('ready', flush=True)\n"
            "end = time.monotonic() + 30\n"
            "while time.monotonic() < end: pass\n")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        reader = sched.SchedReader(os.getpid(), children=lambda pid: (child.pid,))
        first = reader.sample().children[0]
        assert first.watching == ()  # first seen: nothing to say it ran since
        time.sleep(0.3)
        second = reader.sample().children[0]
        assert second.watching == ("smaps_rollup", "task/stat")
        assert second.user_ticks is not None and second.kernel_ticks is not None
        assert sched.watched_entries(Path(f"/proc/{child.pid}/fd"), os.getpid() + 1) == ()  # another process's
    finally:
        child.kill()
        child.wait()


NETSTAT = ("TcpExt: SyncookiesSent SyncookiesRecv ListenOverflows ListenDrops\nTcpExt: 0 0 1586 1590\n"
           "IpExt: InNoRoutes InTruncatedPkts\nIpExt: 0 0\n")


def test_listen_overflows_are_read_from_the_namespaces_netstat() -> None:
    assert sched.parse_listen_overflows(NETSTAT) == 1586
    assert sched.parse_listen_overflows("IpExt: InNoRoutes\nIpExt: 0\n") is None
    assert sched.parse_listen_overflows("TcpExt: ListenOverflows\nTcpExt: x\n") is None  # not a count: nothing said


def test_connections_refused_at_a_full_accept_queue_are_seen_opening_with_the_listener_and_its_backlog() -> None:
    # A listener that never accepts, with a backlog of 1, and more connections than its queue holds: the kernel drops
    # the SYNs beyond it (ListenOverflows rises) and those sockets stay in SYN_SENT, waiting for the retransmission.
    import socket

    if not sched.sock_diag.same_network_namespace(os.getpid()):
        pytest.skip("the socket diagnostics answer for another network namespace")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    reader = sched.SchedReader(os.getpid(), children=lambda pid: ())
    first = reader.sample()
    clients = []
    try:
        for _ in range(6):
            c = socket.socket()
            c.setblocking(False)
            c.connect_ex(("127.0.0.1", port))
            clients.append(c)
        deadline = time.monotonic() + 5.0
        seen = ()
        while not seen and time.monotonic() < deadline:
            time.sleep(0.05)
            sample = reader.sample()
            seen = sample.connecting
        assert first.listen_overflows is not None and sample.listen_overflows > first.listen_overflows
        (opening,) = seen
        assert opening.remote == f"127.0.0.1:{port}" and opening.sockets >= 1
        assert opening.listener_pid == os.getpid() and opening.backlog == 1 and opening.accept_queue is not None
    finally:
        for c in clients:
            c.close()
        listener.close()


def test_a_limits_file_gives_its_soft_limits_and_two_processes_differences() -> None:
    text = ("Limit                     Soft Limit           Hard Limit           Units     \n"
            "Max cpu time              unlimited            unlimited            seconds   \n"
            "Max stack size            8388608              unlimited            bytes     \n"
            "Max core file size        0                    unlimited            bytes     \n"
            "Max open files            1024                 1048576              files     \n"
            "Max bogus                 -x                   y\n"
            "garbage\n")
    own = sched.parse_limits(text)
    assert own == {"cpu time": "unlimited", "stack size": "8388608", "core file size": "0", "open files": "1024"}
    theirs = {**own, "open files": "64", "core file size": "unlimited", "cpu time": "5"}
    assert sched.limits_differences(own, theirs) == (("open files", "64", "1,024"),)  # core and CPU time not compared
    assert sched.parse_limits("") == {} and sched.limits_differences(own, own) == ()


def test_the_variables_a_program_sets_in_its_own_environment_are_read_by_name() -> None:
    # A program exports a library's switch from its configuration before importing it: only its memory has it.
    # Names outside the catalogue are kept (the catalogue's are settings with their values), never their values.
    prog = ("import os, sys, time\nos.environ['ZQ_TABLE_MODE'] = 'hunter2'\nos.environ['OMP_NUM_THREADS'] = '1'\n"
            "os.environ['HOME'] = '/elsewhere'\nprint('ready', flush=True)\ntime.sleep(30)\n")
    proc = subprocess.Popen([sys.executable, "-c", prog], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        facts = sched.read_os_facts(proc.pid)
    finally:
        proc.kill()
        proc.wait()
    assert facts.env_set_by_program == ("HOME", "ZQ_TABLE_MODE"), facts.env_set_by_program
    assert "hunter2" not in repr(facts)
    assert sched.program_env_names({"A": "1"}, {"A": "1", "B": "2", "bad name": "x"}) == ("B",)
    many = sched.program_env_names({}, {f"V{i:02d}": "1" for i in range(20)})
    assert many == tuple(f"V{i:02d}" for i in range(8))


def test_the_interpreters_options_are_read_as_the_variables_they_equal() -> None:
    # `python -X dev -B prog.py` sets what PYTHONDEVMODE=1 and PYTHONDONTWRITEBYTECODE=1 set, with no variable in
    # its environment: read from its command line, marked as such; a variable the environment has stays the
    # environment's reading.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONUNBUFFERED"] = "1"
    prog = "import sys, time\nprint('ready', flush=True)\ntime.sleep(30)\n"
    proc = subprocess.Popen([sys.executable, "-X", "dev", "-uB", "-c", prog], stdout=subprocess.PIPE, text=True,
                            env=env)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        facts = sched.read_os_facts(proc.pid)
    finally:
        proc.kill()
        proc.wait()
    assert isinstance(facts.env, tuple)
    by_name = {e.name: (e.value, e.where) for e in facts.env}
    assert by_name["PYTHONDEVMODE"] == ("1", "command line (-X dev)")
    assert by_name["PYTHONDONTWRITEBYTECODE"] == ("1", "command line (-B)")
    assert by_name["PYTHONUNBUFFERED"] == ("1", "process")


def test_interpreter_options_stop_at_the_script_and_count_repeats() -> None:
    from dflash_contract.settings import interpreter_options

    assert interpreter_options(["/usr/bin/python3", "-X", "dev", "-OO", "-Xtracemalloc=25", "-W", "error",
                                "train.py", "-u"]) == (
        ("PYTHONDEVMODE", "1", "-X dev"), ("PYTHONOPTIMIZE", "2", "-OO"),
        ("PYTHONTRACEMALLOC", "25", "-X tracemalloc=25"), ("PYTHONWARNINGS", "error", "-W error"))
    assert interpreter_options(["python", "-m", "pkg", "-u"]) == ()  # the module's own arguments
    assert interpreter_options(["bash", "-u"]) == () and interpreter_options([]) == ()
    assert interpreter_options(["python", "-X"]) == ()  # cut short: nothing read


def test_each_sweep_reads_the_processs_memory_cgroup_where_it_sets_a_limit(tmp_path: Path) -> None:
    """The sweep reads the limit of the process's memory cgroup (v1 here) and its counters, which a rule weighs over
    the window (``analysis.sched.memory_limit_binds``); with no finite limit anywhere above it, nothing."""
    proc, cgroups = tmp_path / "proc", tmp_path / "cgroup"
    (proc / "10" / "task").mkdir(parents=True)
    (proc / "10" / "cgroup").write_text("4:memory:/job-17\n1:cpu:/\n0::/\n")
    (cgroups / "memory" / "job-17").mkdir(parents=True)
    (cgroups / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    group = cgroups / "memory" / "job-17"
    (group / "memory.limit_in_bytes").write_text(f"{2 << 30}\n")
    (group / "memory.usage_in_bytes").write_text(f"{(2 << 30) - 4096}\n")
    (group / "memory.failcnt").write_text("812\n")
    (group / "memory.stat").write_text("cache 2000000000\npgpgin 91000\n")
    reader = sched.SchedReader(10, proc_root=proc, cgroup_root=cgroups, children=lambda pid: ())
    memory = reader.sample().cgroup_memory
    assert memory is not None and (memory.version, memory.group, memory.limit_bytes) == (1, "job-17", 2 << 30)
    assert (memory.usage_bytes, memory.limit_hits, memory.pages_in) == ((2 << 30) - 4096, 812, 91000)
    (group / "memory.limit_in_bytes").write_text("9223372036854771712\n")  # the limit lifted
    assert sched.SchedReader(10, proc_root=proc, cgroup_root=cgroups, children=lambda pid: ()).sample(
        ).cgroup_memory is None
