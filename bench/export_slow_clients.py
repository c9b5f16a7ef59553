"""Can slow clients keep `dflash-diag export` from serving its scrapers? Scrape times with and without ``--slow``
clients that each send their request one header byte every ``--every`` seconds (docs/benchmarks.md, "Slow
clients").

Starts one probed program (its board in a private directory) and ``dflash-diag export --port 0 --all`` (the real
command, ``--token-file`` with ``--token``), then scrapes ``--scrapes`` times back to back, each with a 10 s timeout
(Prometheus's default): first alone, then while the slow clients hold their connections (each reopens as soon as
the exporter drops it, for the whole phase). Then ``--flood`` clients scrape back to back for ``--flood-s`` seconds:
the answers a second (bounded at 20) and the exporter's CPU over that time (from /proc). Prints and writes
(``--json``) the median and the slowest scrape and how many timed out, for the first two phases.

  .venv/bin/python bench/export_slow_clients.py --slow 4 --every 2 --scrapes 20 --json /tmp/slow.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import select
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PUBLISHER = """
import probes, queue, time
s = probes.start(probes.ProbesConfig(enabled=frozenset({"queues"}), publish_interval_s=0.5, timer_interval_s=0.5))
s.watch_queue("jobs", queue.Queue(maxsize=3)).put(1)
print("ready", flush=True)
time.sleep(3600)
"""
SCRAPE_TIMEOUT_S = 10.0


def slow_client(port: int, every_s: float, stop: threading.Event, drops: list[float]) -> None:
    """One header byte every ``every_s``; when the exporter drops the connection, note when, and open another."""
    head = b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nX-Slow: " + b"a" * 500 + b"\r\n\r\n"
    while not stop.is_set():
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            time.sleep(0.2)
            continue
        t0 = time.monotonic()
        try:
            for byte in head:
                readable, _, _ = select.select([sock], [], [], every_s)
                if stop.is_set():
                    return
                if readable and not sock.recv(4096):
                    drops.append(time.monotonic() - t0)
                    break
                sock.sendall(bytes([byte]))
        except OSError:
            drops.append(time.monotonic() - t0)
        finally:
            sock.close()


def scrape(url: str, token: str) -> float | None:
    t0 = time.monotonic()
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=SCRAPE_TIMEOUT_S) as response:
            response.read()
    except (urllib.error.URLError, TimeoutError, OSError):
        return None
    return time.monotonic() - t0


def phase(url: str, token: str, scrapes: int) -> dict[str, Any]:
    times = []
    for _ in range(scrapes):
        times.append(scrape(url, token))
        time.sleep(0.2)
    served = [t for t in times if t is not None]
    return {"scrapes": scrapes, "timed_out": scrapes - len(served),
            "median_ms": round(1e3 * statistics.median(served), 1) if served else None,
            "max_ms": round(1e3 * max(served), 1) if served else None}


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` (/proc/PID/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def flood(url: str, token: str, clients: int, seconds: float, exporter_pid: int) -> dict[str, Any]:
    served: list[int] = []
    stop = threading.Event()

    def client() -> None:
        while not stop.is_set():
            if scrape(url, token) is not None:
                served.append(1)

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    cpu0, t0 = cpu_s(exporter_pid), time.monotonic()
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    elapsed = time.monotonic() - t0
    cpu = cpu_s(exporter_pid) - cpu0
    for t in threads:
        t.join(SCRAPE_TIMEOUT_S + 5)
    return {"clients": clients, "seconds": round(elapsed, 1), "answers_per_s": round(len(served) / elapsed, 1),
            "exporter_cpu_pct_of_a_core": round(100 * cpu / elapsed, 1)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--slow", type=int, default=4)
    p.add_argument("--every", type=float, default=2.0)
    p.add_argument("--scrapes", type=int, default=20)
    p.add_argument("--flood", type=int, default=20)
    p.add_argument("--flood-s", type=float, default=20.0)
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with tempfile.TemporaryDirectory(prefix="export-slow-") as tmp:
        board_dir = Path(tmp) / "boards"
        board_dir.mkdir(mode=0o700)
        token_file = Path(tmp) / "token"
        token = "bench-token-" + os.urandom(8).hex()
        token_file.write_text(token)
        token_file.chmod(0o600)
        env["DFLASH_DIAG_BOARD_DIR"] = str(board_dir)
        publisher = subprocess.Popen([sys.executable, "-c", PUBLISHER], env=env, stdout=subprocess.PIPE, text=True)
        exporter = subprocess.Popen([sys.executable, "-m", "dflash_diag", "export", "--port", "0", "--all", "--no-gpu",
                                     "--token-file", str(token_file)], env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, text=True, cwd=REPO)
        try:
            assert publisher.stdout is not None and exporter.stdout is not None
            assert publisher.stdout.readline().strip() == "ready"
            match = re.search(r"http://127\.0\.0\.1:(\d+)/metrics", exporter.stdout.readline())
            assert match, "the exporter did not start"
            port = int(match.group(1))
            url = f"http://127.0.0.1:{port}/metrics"
            alone = phase(url, token, args.scrapes)
            stop, drops = threading.Event(), []
            clients = [threading.Thread(target=slow_client, args=(port, args.every, stop, drops), daemon=True)
                       for _ in range(args.slow)]
            for t in clients:
                t.start()
            time.sleep(args.every * 1.5)
            beside = phase(url, token, args.scrapes)
            stop.set()
            for t in clients:
                t.join(args.every + 5)
            flooded = flood(url, token, args.flood, args.flood_s, exporter.pid) if args.flood else None
        finally:
            exporter.send_signal(signal.SIGTERM)
            publisher.kill()
            exporter.wait(30)
            publisher.wait(30)
    report = {"date": time.strftime("%Y-%m-%d %H:%M"), "host": platform.node(), "cpus": os.cpu_count(),
              "load_avg": os.getloadavg(), "slow_clients": args.slow, "every_s": args.every, "alone": alone,
              "beside_slow_clients": beside, "flood": flooded,
              "slow_client_held_s_median": round(statistics.median(drops), 2) if drops else None}
    print(json.dumps(report, indent=1))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
