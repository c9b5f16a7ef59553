"""How fast `doctor --attach`'s probes leave a process when doctor ends early (issue 22, item 5).

A small threaded program without probes (a producer and a consumer around a bounded queue, the main thread in
``join()``) runs throughout. Each round starts ``dflash-diag doctor PID --attach --duration 120``, waits until
the probes it attached are on the board, then ends doctor:

- ``--signal TERM`` (or HUP): the time from the signal to doctor's exit (it detaches first), and its exit code;
- ``--signal KILL``: the time from the kill to the board's removal by the probes themselves (the lease: the
  board thread sees the command is gone and detaches them).

    .venv/bin/python bench/attach_lease.py --signal KILL --rounds 5
    .venv/bin/python bench/attach_lease.py --signal TERM --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROGRAM = r"""
import queue, threading, time
q = queue.Queue(maxsize=4)
def producer():
    while True:
        q.put(time.time())
        time.sleep(0.004)
def consumer():
    while True:
        q.get()
workers = [threading.Thread(target=f, name=n, daemon=True) for f, n in ((producer, "producer"), (consumer, "consumer"))]
for t in workers:
    t.start()
print("ready", flush=True)
workers[0].join()
"""


def _attached(board: Path) -> bool:
    try:
        session = json.loads(board.read_text())["session"]
    except (OSError, ValueError, KeyError):
        return False
    return bool(session.get("attached")) and bool(session.get("enabled"))


def _wait(predicate: object, timeout_s: float) -> float:
    t0 = time.monotonic()
    while not predicate():  # type: ignore[operator]
        if time.monotonic() - t0 > timeout_s:
            raise SystemExit(f"not in {timeout_s:g} s")
        time.sleep(0.01)
    return time.monotonic() - t0


def one_round(pid: int, board_dir: Path, sig: int, env: dict[str, str]) -> dict[str, float | int]:
    board = board_dir / f"{pid}.json"
    doctor = subprocess.Popen([sys.executable, "-m", "dflash_diag", "doctor", str(pid), "--attach", "--duration", "120",
                               "--json"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait(lambda: _attached(board), 120)
    t0 = time.monotonic()
    doctor.send_signal(sig)
    code = doctor.wait(timeout=120)
    exited_s = time.monotonic() - t0
    gone_s = _wait(lambda: not board.exists(), 60) + exited_s
    return {"exit_code": code, "doctor_exit_s": exited_s, "probes_gone_s": gone_s}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--signal", default="KILL", choices=("KILL", "TERM", "HUP"), help="how doctor ends (default KILL)")
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args(argv)
    sig = getattr(signal, f"SIG{args.signal}")
    with tempfile.TemporaryDirectory(prefix="attach-lease-") as tmp:
        board_dir = Path(tmp) / "boards"
        board_dir.mkdir(mode=0o700)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "DFLASH_DIAG_BOARD_DIR": str(board_dir)}
        program = subprocess.Popen([sys.executable, "-c", PROGRAM], stdout=subprocess.PIPE, text=True,
                                   env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
        try:
            assert program.stdout is not None and program.stdout.readline().startswith("ready")
            rounds = [one_round(program.pid, board_dir, sig, env) for _ in range(args.rounds)]
            assert program.poll() is None, "the program died"
        finally:
            program.kill()
            program.wait()
    for r in rounds:
        print(f"SIG{args.signal}: doctor exit {r['exit_code']} after {r['doctor_exit_s']:.2f} s; "
              f"probes gone after {r['probes_gone_s']:.2f} s")
    gone = [float(r["probes_gone_s"]) for r in rounds]
    print(f"probes gone: median {statistics.median(gone):.2f} s, max {max(gone):.2f} s over {len(gone)} rounds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
