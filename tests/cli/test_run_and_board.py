"""`dflash-diag run` and `dflash-diag board` end to end, with real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dflash_diag.sources.board import read_board

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "dflash_diag"]

pytestmark = pytest.mark.slow

SCRIPT = r"""
import os, queue, signal, sys, time
import probes
ready, release, mode = sys.argv[1], sys.argv[2], sys.argv[3]
session = probes.current()
q = queue.Queue(maxsize=5)
if session is not None:
    session.watch_queue("q_hs", q)
    session.set_app(name="toy")
q.put(1)
if mode == "handler":
    def on_term(signum, frame):
        open(release + ".term", "w").write("got SIGTERM")
        sys.exit(42)
    signal.signal(signal.SIGTERM, on_term)
open(ready, "w").write(str(os.getpid()) + " " + str(session is not None))
deadline = time.time() + 60
while not os.path.exists(release) and time.time() < deadline:
    if session is not None:
        session.step()
    time.sleep(0.02)
sys.exit(7)
"""


def _env(board_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT)
    env.pop("DFLASH_DIAG_BOARD_DIR", None)
    return env


def _start(tmp_path: Path, board_dir: Path, mode: str = "plain", probes: str = "queues,codedrift"):
    script = tmp_path / "toy.py"
    script.write_text(SCRIPT)
    ready, release = tmp_path / "ready", tmp_path / "release"
    proc = subprocess.Popen(
        [*CLI, "run", "--probes", probes, "--board-dir", str(board_dir), "--",
         sys.executable, str(script), str(ready), str(release), mode],
        env=_env(board_dir), cwd=tmp_path, stderr=subprocess.PIPE, text=True,
    )
    deadline = time.monotonic() + 60
    while not ready.exists() or not ready.read_text():
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline, "the program never started"
        time.sleep(0.05)
    pid_text, probed = ready.read_text().split()
    return proc, int(pid_text), probed == "True", release


def test_run_gives_a_board_with_the_queue_and_passes_the_exit_code(tmp_path: Path, board_dir: Path) -> None:
    proc, pid, probed, release = _start(tmp_path, board_dir)
    try:
        assert probed
        deadline = time.monotonic() + 30  # the next publish (<= 1 s) carries the queue registered after start
        while "q_hs" not in read_board(pid, board_dir).probes["queues"]:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        out = subprocess.run([*CLI, "board", str(pid), "--json", "--board-dir", str(board_dir)],
                             env=_env(board_dir), capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        board = json.loads(out.stdout)
        assert board["writer"]["pid"] == pid
        assert board["probes"]["queues"]["q_hs"]["depth"] == 1
        assert board["probes"]["codedrift"]["status"] == "ok"
        assert set(board["probes"]) == {"queues", "codedrift"}
        assert board["reader"]["stale"] is None and board["app"]["name"] == "toy"
        human = subprocess.run([*CLI, "board", str(pid), "--board-dir", str(board_dir)],
                               env=_env(board_dir), capture_output=True, text=True, timeout=60)
        assert human.returncode == 0 and "q_hs" in human.stdout and "codedrift" in human.stdout
        listed = subprocess.run([*CLI, "board", "--json", "--board-dir", str(board_dir)],
                                env=_env(board_dir), capture_output=True, text=True, timeout=60)
        assert listed.returncode == 0 and [b["writer"]["pid"] for b in json.loads(listed.stdout)] == [pid]
    finally:
        release.write_text("go")
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 7
    assert f"PID {pid} under probes" in err and f"dflash-diag board {pid}" in err
    assert not (board_dir / f"{pid}.json").exists()  # removed at exit


def test_sigterm_is_forwarded(tmp_path: Path, board_dir: Path) -> None:
    proc, pid, _, release = _start(tmp_path, board_dir, mode="handler")
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == 42
    assert (tmp_path / "release.term").read_text() == "got SIGTERM"


def test_death_by_signal_is_128_plus_n(tmp_path: Path, board_dir: Path) -> None:
    proc, pid, _, _ = _start(tmp_path, board_dir, probes="none")
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM


def test_usage_errors() -> None:
    none = subprocess.run([*CLI, "run"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert none.returncode == 2 and "no command given" in none.stderr and "Traceback" not in none.stderr
    missing = subprocess.run([*CLI, "run", "--", "no-such-program-xyz"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert missing.returncode == 6 and "command not found: no-such-program-xyz" in missing.stderr
    bad = subprocess.run([*CLI, "run", "--probes", "gli", "--", "true"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert bad.returncode == 2 and "unknown probe 'gli'" in bad.stderr


def test_board_of_an_unprobed_or_missing_process(board_dir: Path) -> None:
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        out = subprocess.run([*CLI, "board", str(sleeper.pid), "--board-dir", str(board_dir)],
                             capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert out.returncode == 6
        assert "dflash-diag run" in out.stderr and out.stderr.count("\n") == 1
    finally:
        sleeper.kill()
        sleeper.wait()
    gone = subprocess.run([*CLI, "board", "4194301", "--board-dir", str(board_dir)],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert gone.returncode == 3 and "no process with PID 4194301" in gone.stderr


def test_run_chains_to_an_existing_sitecustomize(tmp_path: Path, board_dir: Path) -> None:
    user_site = tmp_path / "usersite"
    user_site.mkdir()
    (user_site / "sitecustomize.py").write_text("import os\nos.environ['USER_SITECUSTOMIZE_RAN'] = '1'\n")
    script = tmp_path / "check.py"
    script.write_text(
        "import os, sys, probes\n"
        "print(os.environ.get('USER_SITECUSTOMIZE_RAN'), probes.current() is not None,\n"
        "      'DFLASH_DIAG_RUN_TOKEN' in os.environ, any('_bootstrap' in p for p in sys.path))\n"
    )
    env = _env(board_dir)
    env["PYTHONPATH"] = os.pathsep.join([str(user_site), str(ROOT)])
    out = subprocess.run([*CLI, "run", "--probes", "queues", "--board-dir", str(board_dir), "--", sys.executable, str(script)],
                         env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    # the user's sitecustomize ran, probes started, and the bootstrap left no trace for subprocesses
    assert out.stdout.split() == ["1", "True", "False", "False"]


UNAWARE = r"""
import os, queue, sys, threading, time
ready, release = sys.argv[1], sys.argv[2]
q = queue.Queue(maxsize=4)  # made by the program, never registered: it does not know about the probes

def produce():
    while True:
        q.put(time.time())

def consume():
    while True:
        q.get()
        time.sleep(0.01)

for target in (produce, consume):
    threading.Thread(target=target, daemon=True).start()
open(ready, "w").write(str(os.getpid()) + " True")
deadline = time.time() + 60
while not os.path.exists(release) and time.time() < deadline:
    time.sleep(0.05)
"""


def test_run_finds_the_queue_a_program_never_registers(tmp_path: Path, board_dir: Path) -> None:
    """`attach` found the program's `q` (it looks at the threads' frames) and `run` did not: its probes start before
    the program has made the queue. The session under `run` now looks again while the program runs."""
    script = tmp_path / "unaware.py"
    script.write_text(UNAWARE)
    ready, release = tmp_path / "ready", tmp_path / "release"
    proc = subprocess.Popen([*CLI, "run", "--probes", "queues", "--board-dir", str(board_dir), "--",
                             sys.executable, str(script), str(ready), str(release)],
                            env=_env(board_dir), cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not ready.exists() or not ready.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, "the program never started"
            time.sleep(0.05)
        pid = int(ready.read_text().split()[0])
        deadline = time.monotonic() + 30  # the first looks are 1, 2, 4 s after start
        while "q" not in read_board(pid, board_dir).probes["queues"]:
            assert time.monotonic() < deadline, read_board(pid, board_dir).probes["queues"]
            time.sleep(0.1)
        reading = read_board(pid, board_dir).probes["queues"]["q"]
        assert reading["maxsize"] == 4 and reading["instrumented"] is True
    finally:
        release.write_text("go")
        proc.communicate(timeout=60)
