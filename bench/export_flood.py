"""What a flood of scrapers costs a trainer on the same machine: the reference trainer's steps per second with
no exporter, and with an exporter hammered by ``--clients`` scrapers in a loop, before and after the exporter
bounded its work (docs/benchmarks.md, "Scrape flood").

    python bench/export_flood.py --rounds 3 --window 20 --clients 20 --json out.json      # the 2-core CPU box

Starts the tiny reference trainer (CPU, its probes on, a private board directory) and, for each window,
one of three modes, the order rotated every round:

- ``none``: no exporter;
- ``unbounded``: the exporter as it was: prometheus_client's ``start_http_server`` (a thread per connection)
  rendering the page, and re-reading the boards, for every request; the same collector;
- ``bounded``: ``dflash-diag export``: the page rendered at most once a second, four serving threads, at most
  20 scrapes a second (dflash_diag/export/serve.py).

In both exporter modes ``--clients`` threads of this process scrape back to back (closed loop: each waits for
its answer). A window's rate is the probes' step counter on the trainer's board (``session.steps``) over it;
the figures are the median steps/s per mode and the median of each round's ratio to ``none``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
MODES = ("none", "unbounded", "bounded")
# The exporter before serve.py: prometheus_client's server, the same collector, rendered per request.
UNBOUNDED = """
import sys, time
from prometheus_client import start_http_server
from dflash_diag.export.prometheus import BoardCollector, registry_for
server, _ = start_http_server(0, addr="127.0.0.1", registry=registry_for(BoardCollector(None, board_dir=sys.argv[1])))
print(f"http://127.0.0.1:{server.server_address[1]}/metrics", flush=True)
time.sleep(3600)
"""


def _board_step(board: Path) -> int:
    """The probes' count of training steps (``session.steps``: every step, where the program's own ``app.step``
    moves only at its log interval), or -1."""
    try:
        step = json.loads(board.read_text()).get("session", {}).get("steps")
    except (OSError, ValueError):
        return -1
    return step if isinstance(step, int) else -1


def _start_trainer(root: Path, warm_steps: int) -> tuple[subprocess.Popen[bytes], Path]:
    board_dir = root / "boards"
    board_dir.mkdir(mode=0o700)
    env = {**os.environ, "DFLASH_DIAG_BOARD_DIR": str(board_dir), "WANDB_MODE": "disabled", "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "reference_trainer", "--preset", "tiny", "--max-seconds", "3600",
                             "--wandb", "off", "--checkpoint-dir", str(root / "ckpt")], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    board = board_dir / f"{proc.pid}.json"
    deadline = time.monotonic() + 300
    while _board_step(board) < warm_steps:
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise SystemExit("the trainer did not reach its warm-up steps")
        time.sleep(0.5)
    return proc, board


def _start_exporter(mode: str, board_dir: Path) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if mode == "unbounded":
        argv = [sys.executable, "-c", UNBOUNDED, str(board_dir)]
    else:
        argv = [sys.executable, "-m", "dflash_diag", "export", "--port", "0", "--all", "--no-gpu", "--board-dir",
                str(board_dir)]
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    match = re.search(r"http://127\.0\.0\.1:\d+/metrics", line)
    if match is None:
        proc.kill()
        raise SystemExit(f"the {mode} exporter did not start: {line!r}")
    return proc, match.group(0)


class Flood:
    """``clients`` threads scraping ``url`` back to back until stopped; counts the scrapes answered."""

    def __init__(self, url: str, clients: int) -> None:
        self.url = url
        self.stop = threading.Event()
        self.scrapes = 0
        self.errors = 0
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._client, daemon=True) for _ in range(clients)]

    def _client(self) -> None:
        while not self.stop.is_set():
            try:
                with urllib.request.urlopen(self.url, timeout=30) as response:
                    response.read()
                ok = True
            except OSError:
                ok = False
            with self._lock:
                if ok:
                    self.scrapes += 1
                else:
                    self.errors += 1

    def __enter__(self) -> Flood:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self._threads:
            t.join(timeout=35)


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (and its threads) so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def window(mode: str, board: Path, seconds: float, clients: int) -> dict[str, Any]:
    exporter = None
    try:
        flood = None
        if mode != "none":
            exporter, url = _start_exporter(mode, board.parent)
            flood = Flood(url, clients).__enter__()
            time.sleep(2.0)  # the flood runs before the window opens
        cpu0 = _cpu_s(exporter.pid) if exporter else 0.0
        step0, t0 = _board_step(board), time.monotonic()
        scrapes0 = flood.scrapes if flood else 0
        time.sleep(seconds)
        step1, t1 = _board_step(board), time.monotonic()
        scrapes = (flood.scrapes - scrapes0) if flood else 0
        cpu = (_cpu_s(exporter.pid) - cpu0) if exporter else 0.0
        if flood:
            flood.__exit__()
        return {"mode": mode, "steps_per_s": (step1 - step0) / (t1 - t0), "scrapes_per_s": scrapes / (t1 - t0),
                "exporter_cpu_share": cpu / (t1 - t0), "errors": flood.errors if flood else 0}
    finally:
        if exporter is not None:
            exporter.send_signal(signal.SIGTERM)
            try:
                exporter.wait(timeout=20)
            except subprocess.TimeoutExpired:
                exporter.kill()
                exporter.wait()


def measure(rounds: int, seconds: float, clients: int, warm_steps: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="export-flood-") as tmp:
        trainer, board = _start_trainer(Path(tmp), warm_steps)
        try:
            windows = []
            for r in range(rounds):
                order = MODES[r % 3:] + MODES[: r % 3]
                for mode in order:
                    w = window(mode, board, seconds, clients)
                    w["round"] = r
                    windows.append(w)
                    print(f"round {r} {mode:>9}: {w['steps_per_s']:.3f} steps/s, {w['scrapes_per_s']:7.1f} scrapes/s, "
                          f"exporter CPU {100 * w['exporter_cpu_share']:.0f}% of a core", flush=True)
        finally:
            trainer.send_signal(signal.SIGKILL)
            trainer.wait()
    result: dict[str, Any] = {"rounds": rounds, "window_s": seconds, "clients": clients, "cpus": os.cpu_count(),
                              "windows": windows}
    for mode in MODES:
        rows = [w for w in windows if w["mode"] == mode]
        result[mode] = {k: statistics.median(w[k] for w in rows)
                        for k in ("steps_per_s", "scrapes_per_s", "exporter_cpu_share")}
    for mode in ("unbounded", "bounded"):
        ratios = [next(w for w in windows if w["round"] == r and w["mode"] == mode)["steps_per_s"]
                  / next(w for w in windows if w["round"] == r and w["mode"] == "none")["steps_per_s"]
                  for r in range(rounds)]
        result[f"ratio_{mode}"] = statistics.median(ratios)
        result[f"ratios_{mode}"] = ratios
    return result


def table(result: dict[str, Any]) -> str:
    lines = ["| exporter | trainer steps/s (median) | vs none (median of rounds) | scrapes/s served | exporter CPU |",
             "|---|---|---|---|---|"]
    for mode in MODES:
        r = result[mode]
        ratio = "1" if mode == "none" else f"**{result[f'ratio_{mode}']:.2f}**"
        lines.append(f"| {mode} | {r['steps_per_s']:.3f} | {ratio} | {r['scrapes_per_s']:.0f} | "
                     f"{100 * r['exporter_cpu_share']:.0f}% of a core |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--window", type=float, default=20.0, help="seconds per window")
    p.add_argument("--clients", type=int, default=20)
    p.add_argument("--warm-steps", type=int, default=4)
    p.add_argument("--json", metavar="PATH")
    args = p.parse_args(argv)
    result = measure(args.rounds, args.window, args.clients, args.warm_steps)
    print(table(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
