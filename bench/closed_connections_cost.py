"""What counting a client's closed connections costs, and how often it finds them (sources/sched.closed_connections).

A local service and a client that opens a connection per request (~300 a second) run for --warm-s seconds, so the
namespace holds thousands of connections in TIME_WAIT. Then, --calls times each:

- the /proc TCP table read alone (every line, TIME_WAIT included: the walk whose length makes the race);
- the kernel's dump of established sockets (sock_diag, ``established_remotes``);
- ``closed_connections`` as doctor calls it (descriptors, table, and the dump where nothing matched), and the same
  without the dump (what it did before): wall time, median and p90, and the share of calls that found the service.

  .venv/bin/python bench/closed_connections_cost.py            # prints a markdown table and JSON
  .venv/bin/python bench/closed_connections_cost.py --calls 50 --warm-s 10
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from dflash_diag.sources import sched, sock_diag

SERVICE = """
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
CLIENT = """
import socket, sys, time
port = int(sys.argv[1])
while True:
    conn = socket.create_connection(('127.0.0.1', port))
    conn.sendall(b'q'); conn.recv(8)
    time.sleep(0.002)
    conn.close()
"""


def _timed(fn: Callable[[], Any], calls: int) -> tuple[dict[str, float], list[Any]]:
    took_ms, results = [], []
    for _ in range(calls):
        t0 = time.perf_counter()
        results.append(fn())
        took_ms.append((time.perf_counter() - t0) * 1e3)
    took_ms.sort()
    return {"median_ms": round(statistics.median(took_ms), 2),
            "p90_ms": round(took_ms[int(0.9 * (len(took_ms) - 1))], 2)}, results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--warm-s", type=float, default=8.0)
    args = parser.parse_args()
    service = subprocess.Popen([sys.executable, "-c", SERVICE], stdout=subprocess.PIPE, text=True)
    client = None
    try:
        assert service.stdout is not None
        port = int(service.stdout.readline())
        client = subprocess.Popen([sys.executable, "-c", CLIENT, str(port)])
        time.sleep(args.warm_s)
        pid, endpoint = client.pid, f"127.0.0.1:{port}"
        links = sched.descriptor_links(pid)
        own = {link[8:-1] for _, link in links or () if link.startswith("socket:[")}
        table, waits = _timed(lambda: sched._tcp_waits_and_remotes(pid, sched.PROC, own, set())[0], args.calls)
        dump, _ = _timed(lambda: sock_diag.established_remotes(own), args.calls)
        now, found = _timed(lambda: sched.closed_connections(pid, links=sched.descriptor_links(pid)), args.calls)
        before, found_before = _timed(lambda: sched.closed_connections(
            pid, links=sched.descriptor_links(pid), established=lambda _: set()), args.calls)
    finally:
        for proc in (client, service):
            if proc is not None:
                proc.kill()
                proc.wait()

    def hit_pct(results: list[Any]) -> float:
        return round(100.0 * sum(1 for r in results if r and r[0][0] == endpoint) / len(results), 1)

    doc = {
        "date": dt.date.today().isoformat(), "machine": platform.node(), "cpu": platform.processor() or "?",
        "time_wait_to_service": max((n for r, n in waits[-1].items() if r.endswith(f":{port:04X}")), default=0),
        "table_read": table, "established_dump": dump,
        "closed_connections": {**now, "found_pct": hit_pct(found)},
        "without_the_dump": {**before, "found_pct": hit_pct(found_before)},
    }
    print("| step | median ms | p90 ms | found |\n|---|---|---|---|")
    for key in ("table_read", "established_dump", "closed_connections", "without_the_dump"):
        row = doc[key]
        print(f"| {key} | {row['median_ms']} | {row['p90_ms']} | {row.get('found_pct', '')} |")
    print(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
