"""Two `attach` of one process at once, and a default board directory someone else took (issue of a shared machine).

Two injections shared the page the tool maps in the process: the second's program overwrote the first's while
the first's call was still queued; the first then waited its whole timeout and reported, falsely, that the main
thread ran no Python code. Now one injection per process at a time: the second is refused at once, in one line,
exit 13. And a default board directory another user created (or opened to others) made every `attach` fail with
a message the victim could not act on; now `attach` publishes to a private directory beside it, as `run` does,
says so, and `board` finds the board there.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from attach_helpers import CLI, ROOT, cli, env_for, wait_for

from dflash_diag.errors import ExitCode
from dflash_diag.inject.request import injection_lock

pytestmark = pytest.mark.slow


def test_a_second_attach_while_one_is_in_flight_is_refused_at_once(ptrace_ok: None, start_plain, board_dir: Path,
                                                                   tmp_path: Path) -> None:
    fifo = tmp_path / "poke"
    os.mkfifo(fifo)
    plain = start_plain("select", str(fifo))  # the first attach waits for a safe point that does not come
    env = env_for(board_dir)
    first = subprocess.Popen([*CLI, "attach", str(plain.pid), "--timeout", "12"], env=env, cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: any(p.name.endswith(".control") or p.name.endswith(".claimed") for p in board_dir.iterdir()),
                 30, "the first attach's request")
        t0 = time.monotonic()
        second = cli("attach", str(plain.pid), "--timeout", "12", env=env)
        took_s = time.monotonic() - t0
    finally:
        _, first_err = first.communicate(timeout=120)
    assert second.returncode == ExitCode.ATTACH_FAILED, second.stderr
    assert "another dflash-diag attach, detach or record --kernels is injecting into PID" in second.stderr
    assert second.stderr.count("\n") == 1 and "Traceback" not in second.stderr and took_s < 10
    assert first.returncode == ExitCode.ATTACH_TIMEOUT and "select" in first_err  # the first one's own, true, answer
    # the lock went with the first: the next attach is not refused for it
    again = cli("attach", str(plain.pid), "--timeout", "2", env=env)
    assert again.returncode == ExitCode.ATTACH_TIMEOUT and "another dflash-diag" not in again.stderr, again.stderr
    plain.keeps_running()


def test_what_an_injection_in_flight_does_to_the_process_is_said_as_that_injection(start_plain,
                                                                                  board_dir: Path) -> None:
    """Mid-injection the first command traces the process and stops its threads: a second attach's preflight saw
    that tracer ("already traced by PID N (python): a debugger ...") before it reached the lock (the whole suite,
    under load). A stopped process stands in for it here; with the lock free, the preflight's own answer stands."""
    import signal

    plain = start_plain("join")
    os.kill(plain.pid, signal.SIGSTOP)
    try:
        with injection_lock(board_dir, plain.pid):
            busy = cli("attach", str(plain.pid), env=env_for(board_dir))
        free = cli("attach", str(plain.pid), env=env_for(board_dir))
    finally:
        os.kill(plain.pid, signal.SIGCONT)
    assert busy.returncode == ExitCode.ATTACH_FAILED and "another dflash-diag attach" in busy.stderr, busy.stderr
    assert free.returncode == ExitCode.ATTACH_FAILED and "is stopped" in free.stderr, free.stderr
    plain.keeps_running()


def test_attach_refuses_while_another_command_holds_the_process(ptrace_ok: None, start_plain, board_dir: Path) -> None:
    plain = start_plain("join")
    with injection_lock(board_dir, plain.pid):
        res = cli("attach", str(plain.pid), "--json", env=env_for(board_dir))
    assert res.returncode == ExitCode.ATTACH_FAILED and "wait for it to finish" in res.stderr, res.stderr
    res = cli("attach", str(plain.pid), "--json", env=env_for(board_dir))  # released: it attaches
    assert res.returncode == 0, res.stderr
    assert cli("detach", str(plain.pid), env=env_for(board_dir)).returncode == 0


def _fallbacks() -> set[Path]:
    return set(Path("/tmp").glob(f"dflash-diag-{os.getuid()}-*"))


def test_a_taken_default_board_directory_falls_back_to_a_private_one(ptrace_ok: None, start_plain,
                                                                      tmp_path: Path) -> None:
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    squatted = runtime / "dflash-diag"
    squatted.mkdir()
    os.chmod(squatted, 0o777)  # what another user's directory looks like to the rules: open to others
    env = {k: v for k, v in os.environ.items() if k not in ("DFLASH_DIAG_BOARD_DIR", "PYTHONPATH")}
    env.update(PYTHONPATH=str(ROOT), XDG_RUNTIME_DIR=str(runtime), WANDB_MODE="disabled")
    before = _fallbacks()
    plain = start_plain("join")
    try:
        res = subprocess.run([*CLI, "attach", str(plain.pid), "--probes", "gil,queues", "--json"], env=env, cwd=ROOT,
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        assert "warning:" in res.stderr and "is open to other users" in res.stderr and "instead" in res.stderr
        board = wait_for(lambda: _board(plain.pid, env), 30, "the board in the private directory")
        assert Path(board["reader"]["path"]).parent != squatted
        assert subprocess.run([*CLI, "detach", str(plain.pid)], env=env, cwd=ROOT, capture_output=True,
                              timeout=120).returncode == 0
        assert list(squatted.iterdir()) == []  # nothing of ours went into the directory we may not trust
    finally:
        for made in _fallbacks() - before:  # this test's own: empty once the board went with detach
            for child in made.iterdir():
                child.unlink()
            made.rmdir()


def _board(pid: int, env: dict[str, str]) -> dict | None:
    res = subprocess.run([*CLI, "board", str(pid), "--json"], env=env, cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    return json.loads(res.stdout) if res.returncode == 0 else None



