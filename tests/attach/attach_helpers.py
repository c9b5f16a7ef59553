"""Helpers of the attach tests: environment, waiting, /proc task states, the CLI, a plain threaded program."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "dflash_diag"]
NO_GDB = "gdb is not installed: `make setup` installs it (as root: apt-get install gdb); the tests about the debugger need it"


def env_for(board_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DFLASH_DIAG_BOARD_DIR", "PYTHONPATH")}
    return {**env, "PYTHONPATH": str(ROOT), "DFLASH_DIAG_BOARD_DIR": str(board_dir), "WANDB_MODE": "disabled", **extra}


def wait_for(predicate: Callable[[], object], timeout_s: float = 60.0, what: str = "condition") -> object:
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met in {timeout_s:g} s")
        time.sleep(0.05)


def task_states(pid: int) -> list[str]:
    """The state letter of every thread of ``pid`` (empty when it is gone)."""
    out = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    for tid in tids:
        try:
            raw = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue
        out.append(raw[raw.rindex(")") + 2 :].split()[0])
    return out


def cli(*args: str, env: dict[str, str], timeout_s: float = 120.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], env=env, capture_output=True, text=True, timeout=timeout_s, cwd=ROOT)


# A plain threaded program that never heard of probes: a producer and a consumer around a bounded queue, a
# counter file the test watches, and a main thread that parks where the test says.
PLAIN = r"""
import os, queue, select, sys, threading, time
counter_path, mode = sys.argv[1], sys.argv[2]
q = queue.Queue(maxsize=4)
done = [0]
def producer():
    while True:
        q.put(time.time())
        time.sleep(0.004)
def consumer():
    while True:
        q.get()
        done[0] += 1
        if done[0] % 10 == 0:
            with open(counter_path + ".tmp", "w") as fh:
                fh.write(str(done[0]))
            os.replace(counter_path + ".tmp", counter_path)
workers = [threading.Thread(target=producer, name="producer", daemon=True),
           threading.Thread(target=consumer, name="consumer", daemon=True)]
for t in workers:
    t.start()
print("ready", os.getpid(), flush=True)
if mode == "select":                 # parked in a C call that is not a lock: no safe point until poked
    fd = os.open(sys.argv[3], os.O_RDONLY | os.O_NONBLOCK)
    select.select([fd], [], [])
if mode == "queue":                  # parked in Queue.get() on a queue nobody fills: a lock wait
    queue.Queue().get()
workers[0].join()                    # parked in a lock wait, forever
"""


class Plain:
    def __init__(self, proc: subprocess.Popen[str], counter: Path) -> None:
        self.proc = proc
        self.pid = proc.pid
        self.counter = counter

    def count(self) -> int:
        try:
            return int(self.counter.read_text() or 0)
        except (OSError, ValueError):
            return 0

    def keeps_running(self, timeout_s: float = 20.0) -> None:
        start = self.count()
        wait_for(lambda: self.count() >= start + 20, timeout_s, "the program's threads making progress")
        assert self.proc.poll() is None


# A gdb that forwards its commands to the real one, pausing after `attach`: a window in which the process
# is certainly stopped and the debugger between two commands, to kill it (or the command) right there.
SLOW_GDB = """#!{python}
import os, subprocess, sys, time
real = subprocess.Popen([{gdb!r}, *sys.argv[1:]], stdin=subprocess.PIPE)
with open(os.environ["SLOW_GDB_PIDFILE"], "w") as fh:
    fh.write(str(real.pid))
try:
    for line in iter(sys.stdin.buffer.readline, b""):
        real.stdin.write(line)
        real.stdin.flush()
        if line.startswith(b"attach "):
            time.sleep(float(os.environ.get("SLOW_GDB_PAUSE_S", "6")))
    real.stdin.close()
except BrokenPipeError:
    pass
sys.exit(real.wait())
"""


def slow_gdb(tmp_path: Path, gdb: str) -> tuple[dict[str, str], Path]:
    bindir = tmp_path / "slow-bin"
    bindir.mkdir()
    wrapper = bindir / "gdb"
    wrapper.write_text(SLOW_GDB.format(python=sys.executable, gdb=gdb))
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    pidfile = tmp_path / "gdb.pid"
    return {"PATH": f"{bindir}:{os.environ.get('PATH', '')}", "SLOW_GDB_PIDFILE": str(pidfile)}, pidfile


def all_stopped(pid: int) -> bool:
    states = task_states(pid)
    return bool(states) and all(s == "t" for s in states)


def gdb_cannot_call(gdb_path: str) -> str | None:
    """Why this gdb cannot call a function in a process on this machine (the check `attach --method gdb` makes on a
    throwaway process before it touches its target), None when it can."""
    from dflash_diag.inject.gdb import cannot_call

    why = cannot_call(gdb_path)
    return None if why is None else f"gdb cannot call a function in a process on this machine ({why})"
