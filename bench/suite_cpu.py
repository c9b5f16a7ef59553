"""Where a test run's CPU goes: run a command (a pytest lane) while polling every process's /proc/PID/stat four
times a second, and attribute each process's CPU to the test that started it (``PYTEST_CURRENT_TEST`` in the
environment it was started with; the pytest workers' own in-process tests count as the workers'). A process's CPU
in its last quarter second before it exits is missed; the figures are a lower bound per process.

  .venv/bin/python bench/suite_cpu.py --out /tmp/lane1.json -- \\
      .venv/bin/python -m pytest -q -n 3 --dist loadfile --ignore=tests/casebook/test_casebook.py \\
      --ignore=tests/casebook/test_jobs.py --ignore=tests/casebook/test_harness.py -p no:cacheprovider

Prints the total, the CPU by kind of process and by test file, and writes every process's row to --out.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

HZ = os.sysconf("SC_CLK_TCK")
POLL_S = 0.25
ENV_KEY = b"PYTEST_CURRENT_TEST="


def _stat(pid: str) -> tuple[str, float] | None:
    """(start ticks, CPU seconds so far) of a process; None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            text = fh.read(4096).decode("utf-8", "replace")
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()
    try:
        return fields[19], (int(fields[11]) + int(fields[12])) / HZ
    except (IndexError, ValueError):
        return None


def _first_sight(pid: str) -> dict[str, str]:
    """A process's command line and the test that started it (from the environment it was started with)."""
    row = {"cmd": "", "test": ""}
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            row["cmd"] = fh.read(400).replace(b"\0", b" ").decode("utf-8", "replace").strip()
        with open(f"/proc/{pid}/environ", "rb") as fh:
            env = fh.read(1 << 20).split(b"\0")
        row["test"] = next((e[len(ENV_KEY):].decode("utf-8", "replace") for e in env if e.startswith(ENV_KEY)), "")
    except OSError:
        pass
    return row


def _sweep() -> dict[str, tuple[str, float]]:
    """Every process now: "PID:start ticks" (a PID reused by a new process is another process) -> (PID, CPU s)."""
    out = {}
    for pid in os.listdir("/proc"):
        stat = _stat(pid) if pid.isdigit() else None
        if stat is not None:
            out[f"{pid}:{stat[0]}"] = (pid, stat[1])
    return out


def poll(before: dict[str, tuple[str, float]], seen: dict[str, dict[str, object]], stop: threading.Event) -> None:
    """Each process's CPU since the command started (a process that was there before counts from then)."""
    me = str(os.getpid())
    while not stop.is_set():
        for key, (pid, cpu_s) in _sweep().items():
            if pid == me:
                continue
            row = seen.get(key)
            if row is None:
                row = seen[key] = {**_first_sight(pid), "cpu_s": 0.0}
            row["cpu_s"] = round(cpu_s - before.get(key, (pid, 0.0))[1], 2)
        stop.wait(POLL_S)


def _kind(cmd: str) -> str:
    for marker, kind in (("reference_trainer", "reference trainer"), ("dflash_diag", "dflash-diag"),
                         ("py-spy", "py-spy"), ("exec(eval(sys.stdin", "pytest worker"), ("pytest", "pytest")):
        if marker in cmd:
            return kind
    return "other python" if "python" in cmd else (cmd.split(" ", 1)[0][-30:] or "(gone before read)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="JSON file for every process's row")
    ap.add_argument("--top", type=int, default=30, help="test files shown")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- the command to run")
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("give the command to run after --")
    out = Path(args.out)
    if out.exists():
        ap.error(f"{out} exists: give a new file")
    seen: dict[str, dict[str, object]] = {}
    stop = threading.Event()
    poller = threading.Thread(target=poll, args=(_sweep(), seen, stop), daemon=True)
    poller.start()
    t0 = time.monotonic()
    rc = subprocess.call(command)
    wall_s = time.monotonic() - t0
    stop.set()
    poller.join(5)
    rows = [row for row in seen.values() if float(row["cpu_s"]) > 0]  # type: ignore[arg-type]
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump({"command": command, "wall_s": round(wall_s, 1), "returncode": rc, "processes": rows}, fh)
    by_kind: collections.Counter[str] = collections.Counter()
    by_file: collections.Counter[str] = collections.Counter()
    count: collections.Counter[str] = collections.Counter()
    for row in rows:
        cpu = float(row["cpu_s"])  # type: ignore[arg-type]
        by_kind[_kind(str(row["cmd"]))] += cpu
        test = str(row["test"]).split(" ", 1)[0]
        name = test.split("::", 1)[0] if test else "(no test: workers, fixtures started without it, others)"
        by_file[name] += cpu
        count[name] += 1
    print(f"{len(rows)} processes, {sum(by_kind.values()):,.0f} CPU-s in {wall_s:.0f} s (exit {rc})")
    for kind, cpu in by_kind.most_common():
        print(f"{cpu:8.1f}  {kind}")
    print("CPU-s  processes  test file")
    for name, cpu in by_file.most_common(args.top):
        print(f"{cpu:8.1f} {count[name]:5d}  {name}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
