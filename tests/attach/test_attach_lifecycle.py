"""What `doctor --attach`, `attach` and `detach` leave behind when they end other than by finishing (issue 22,
items 5 and 8), with real processes: through the ptrace injector (`--method auto`), and with a real gdb where
the test is about the debugger (its window, its death, its answers).

- `doctor --attach` ended by SIGTERM or SIGHUP detaches first, then exits 128+N; killed by SIGKILL, the
  probes' lease makes them detach by themselves (the board thread sees the command is gone);
- `attach --lease-pid` ties the probes to another process the same way;
- `attach`/`detach` of the command's own process (or a thread of it), or of an ancestor that waits for it, is
  refused at once; `--timeout` bounds a debugger that stops answering; a killed command takes its debugger
  with it (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from attach_helpers import CLI, ROOT, all_stopped, cli, env_for, slow_gdb, task_states, wait_for

from dflash_diag.errors import ExitCode
from dflash_diag.inject.orchestrate import inject

pytestmark = pytest.mark.slow

LEASE_BOUND_S = 5.0  # one board-thread tick (1 s) + the detach, with room for this loaded 2-core box


def _inventory(pid: int, board_dir: Path) -> dict:
    out = inject(pid, "inventory", board_dir=board_dir, timeout_s=30)
    assert out.result["ok"], out.result
    return out.result["inventory"]


def _attached(board_path: Path) -> bool:
    try:
        board = json.loads(board_path.read_text())
    except (OSError, ValueError):
        return False
    return bool(board["session"].get("attached")) and bool(board["session"]["enabled"])


def _doctor(pid: int, board_dir: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([*CLI, "doctor", str(pid), "--attach", "--duration", "120", "--json"], cwd=ROOT,
                            env=env_for(board_dir), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_doctor_attach_ended_by_a_signal_detaches_then_exits_128_plus_n(ptrace_ok: None, start_plain, board_dir: Path,
                                                                       sig: int) -> None:
    plain = start_plain("join")
    before = _inventory(plain.pid, board_dir)
    board_path = board_dir / f"{plain.pid}.json"
    doctor = _doctor(plain.pid, board_dir)
    try:
        wait_for(lambda: _attached(board_path), 60, "the probes doctor --attach started")
        doctor.send_signal(sig)
        _out, err = doctor.communicate(timeout=60)
    finally:
        if doctor.poll() is None:
            doctor.kill()
    assert doctor.returncode == 128 + sig, err
    assert f"probes detached from PID {plain.pid}" in err and "Traceback" not in err
    assert not board_path.exists()  # the session attach started is closed, its board removed
    assert _inventory(plain.pid, board_dir) == before  # every hook and probe thread is gone
    plain.keeps_running()


def test_doctor_attach_killed_leaves_a_lease_the_probes_honour(ptrace_ok: None, start_plain, board_dir: Path,
                                                               tmp_path: Path) -> None:
    log = tmp_path / "plain.stderr"
    with log.open("w") as stderr:
        plain = start_plain("join", stderr=stderr)
    before = _inventory(plain.pid, board_dir)
    board_path = board_dir / f"{plain.pid}.json"
    doctor = _doctor(plain.pid, board_dir)
    wait_for(lambda: _attached(board_path), 60, "the probes doctor --attach started")
    lease = json.loads(board_path.read_text())["session"]["attached"]["lease"]
    assert lease["pid"] == doctor.pid
    doctor.kill()  # no handler runs: only the lease can take the probes out
    doctor.wait()
    t0 = time.monotonic()
    wait_for(lambda: not board_path.exists(), 30, "the probes to detach by themselves")
    took_s = time.monotonic() - t0
    assert took_s < LEASE_BOUND_S, took_s
    wait_for(lambda: "probes detached" in log.read_text(), 10, "the probes' note on the program's stderr")
    assert f"PID {doctor.pid}, the dflash-diag command that attached them, is gone" in log.read_text()
    time.sleep(0.5)  # the board thread that ran the detach ends right after it
    assert _inventory(plain.pid, board_dir) == before
    plain.keeps_running()


def test_attach_ended_by_sigterm_cancels_its_request_like_ctrl_c(gdb: str, start_plain, board_dir: Path,
                                                                 tmp_path: Path) -> None:
    plain = start_plain("join")
    extra, _pidfile = slow_gdb(tmp_path, gdb)
    attach = subprocess.Popen([*CLI, "attach", str(plain.pid), "--method", "gdb"], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env_for(board_dir, **extra, SLOW_GDB_PAUSE_S="3"))
    wait_for(lambda: all_stopped(plain.pid), 30, "gdb to stop the process")
    attach.send_signal(signal.SIGTERM)
    _out, err = attach.communicate(timeout=60)
    assert attach.returncode == 128 + signal.SIGTERM, err  # before: killed on the spot (-15)
    assert "Traceback" not in err
    wait_for(lambda: task_states(plain.pid) and not {"T", "t"} & set(task_states(plain.pid)), 20, "the detach")
    plain.keeps_running()
    assert not (board_dir / f"{plain.pid}.json").exists()
    assert [p.name for p in board_dir.iterdir() if ".control" in p.name or ".result" in p.name] == []


def test_attach_with_a_lease_pid_leaves_when_that_process_exits(ptrace_ok: None, start_plain, board_dir: Path) -> None:
    plain = start_plain("join")
    holder = subprocess.Popen(["sleep", "120"])
    try:
        res = cli("attach", str(plain.pid), "--probes", "gil,queues", "--lease-pid", str(holder.pid),
                  env=env_for(board_dir))
        assert res.returncode == 0, res.stderr
        assert f"held for PID {holder.pid}" in res.stdout
        board_path = board_dir / f"{plain.pid}.json"
        time.sleep(2.0)  # the holder runs: the probes stay
        assert _attached(board_path)
    finally:
        holder.kill()
        holder.wait()
    wait_for(lambda: not board_path.exists(), LEASE_BOUND_S, "the probes to leave with their lease holder")
    plain.keeps_running()


def test_attach_lease_pid_mistakes_are_one_line_errors(start_plain, board_dir: Path) -> None:
    plain = start_plain("join")
    res = cli("attach", str(plain.pid), "--lease-pid", str(plain.pid), env=env_for(board_dir))
    assert res.returncode == ExitCode.USAGE and "is the process the probes go into" in res.stderr
    gone = subprocess.Popen(["true"])
    gone.wait()
    res = cli("attach", str(plain.pid), "--lease-pid", str(gone.pid), env=env_for(board_dir))
    assert res.returncode == ExitCode.NO_PROCESS and "to hold the probes' lease" in res.stderr
    assert "Traceback" not in res.stderr and not (board_dir / f"{plain.pid}.json").exists()


SELF = r"""
import os, sys, threading, time
from dflash_diag.cli import main
command, which, board_dir = sys.argv[1:4]
target = os.getpid()
if which == "thread":
    ids = []
    threading.Thread(target=lambda: (ids.append(threading.get_native_id()), time.sleep(600)), daemon=True).start()
    while not ids:
        time.sleep(0.01)
    target = ids[0]
sys.exit(main([command, str(target), "--timeout", "5", "--board-dir", board_dir]))
"""


@pytest.mark.parametrize(("command", "which"), [("attach", "pid"), ("detach", "pid"), ("attach", "thread")])
def test_attaching_to_its_own_process_is_refused_at_once(ptrace_ok: None, board_dir: Path, command: str,
                                                         which: str) -> None:
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, "-c", SELF, command, which, str(board_dir)], cwd=ROOT, env=env_for(board_dir),
                         capture_output=True, text=True, timeout=60)  # before the fix: stopped by its own gdb for good
    took_s = time.monotonic() - t0
    assert res.returncode == ExitCode.ATTACH_FAILED, res.stderr
    assert "is this dflash-diag command itself" in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert took_s < 10.0  # interpreter start-up; nothing waits
    assert [p.name for p in board_dir.iterdir()] == []


PARENT = r"""
import json, os, subprocess, sys, time
capture = sys.argv[1] == "capture"
t0 = time.monotonic()
res = subprocess.run([sys.executable, "-m", "dflash_diag", "attach", str(os.getpid()), "--timeout", "20"],
                     capture_output=capture, text=True)
print(json.dumps({"rc": res.returncode, "stderr": res.stderr if capture else None, "took_s": time.monotonic() - t0}))
"""


@pytest.mark.parametrize("how", ["capture", "wait"])
def test_attaching_to_an_ancestor_that_waits_for_it_is_refused_at_once(ptrace_ok: None, board_dir: Path, how: str) -> None:
    res = subprocess.run([sys.executable, "-c", PARENT, how], cwd=ROOT, env=env_for(board_dir), capture_output=True,
                         text=True, timeout=90)
    assert res.returncode == 0, res.stderr
    child = json.loads(res.stdout.strip().splitlines()[-1])
    err = child["stderr"] if how == "capture" else res.stderr
    assert child["rc"] == ExitCode.ATTACH_FAILED, err
    assert "is an ancestor of this command and its main thread waits for the command to end" in err
    assert ("poll" if how == "capture" else "wait4") in err
    assert child["took_s"] < 10.0  # before the fix: the whole --timeout (20 s), then exit 14


def test_timeout_bounds_a_debugger_that_stops_answering(gdb: str, start_plain, board_dir: Path,
                                                        tmp_path: Path) -> None:
    plain = start_plain("join")
    extra, _pidfile = slow_gdb(tmp_path, gdb)  # answers `attach`, then nothing for 60 s
    t0 = time.monotonic()
    res = cli("attach", str(plain.pid), "--timeout", "2", "--method", "gdb",
              env=env_for(board_dir, **extra, SLOW_GDB_PAUSE_S="60"))
    took_s = time.monotonic() - t0
    assert res.returncode == ExitCode.ATTACH_FAILED, res.stderr
    assert "the --timeout ran out)" in res.stderr and "nothing was injected" in res.stderr
    assert took_s < 2 + 4.5, took_s  # start-up + --timeout + FINISH_S; before the fix: 10 s per command at least
    wait_for(lambda: task_states(plain.pid) and not {"T", "t"} & set(task_states(plain.pid)), 5, "no stopped thread")
    plain.keeps_running()
    assert not (board_dir / f"{plain.pid}.json").exists()


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def test_a_killed_command_takes_its_debugger_with_it(gdb: str, start_plain, board_dir: Path, tmp_path: Path) -> None:
    plain = start_plain("join")
    extra, pidfile = slow_gdb(tmp_path, gdb)  # a debugger busy for 120 s: it reads no end-of-file meanwhile
    attach = subprocess.Popen([*CLI, "attach", str(plain.pid), "--method", "gdb"], cwd=ROOT, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, env=env_for(board_dir, **extra, SLOW_GDB_PAUSE_S="120"))
    wait_for(lambda: all_stopped(plain.pid), 30, "gdb to stop the process")
    debugger = _children(attach.pid)
    assert len(debugger) == 1
    real_gdb = int(pidfile.read_text())
    attach.kill()
    attach.wait()
    t0 = time.monotonic()
    wait_for(lambda: not _alive(debugger[0]) and not _alive(real_gdb), 10, "the debugger to go with the command")
    wait_for(lambda: task_states(plain.pid) and not {"T", "t"} & set(task_states(plain.pid)), 10, "the detach")
    assert time.monotonic() - t0 < 5.0  # before the fix: stopped for the debugger's 120 s
    plain.keeps_running()


def test_a_lease_pid_is_refused_for_a_process_in_another_pid_namespace(board_dir: Path) -> None:
    import shutil

    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) to start a process in its own PID namespace")
    outer = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", "sleep", "60"])
    holder = subprocess.Popen(["sleep", "60"])
    try:
        inner = wait_for(lambda: _children(outer.pid), 10, "the process in the new PID namespace")[0]  # type: ignore[index]
        res = cli("attach", str(inner), "--lease-pid", str(holder.pid), env=env_for(board_dir))
        assert res.returncode == ExitCode.USAGE and "runs in another PID namespace" in res.stderr, res.stderr
    finally:
        for p in (outer, holder):
            p.kill()
            p.wait()
