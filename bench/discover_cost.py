"""What one look for a program's queues costs (probes/discover.py): `attach` takes it once, a `dflash-diag run`
session 1, 2, 4, 8, 16 and 32 s after start and then once a minute, on its own board thread.

A stand-in program: THREADS threads, each in a few frames deep with a handful of locals, an object holding a queue
and a list of tensors-like objects; the look is timed REPEAT times (the collector held off, as in the probes).

    .venv/bin/python bench/discover_cost.py                 # 8 threads
    .venv/bin/python bench/discover_cost.py --threads 64
"""

from __future__ import annotations

import argparse
import platform
import queue
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from probes.discover import discover_objects


class _Session:
    """Records what discovery would register (no probes installed: the cost is the look itself)."""

    def __init__(self) -> None:
        self.queues: dict[str, queue.Queue] = {}

    def watch_queue(self, name: str, q: queue.Queue) -> queue.Queue:
        self.queues[name] = q
        return q

    def watch_model(self, name: str, model: object) -> None:
        pass


class _Loader:
    def __init__(self, out: queue.Queue) -> None:
        self.out = out
        self.buffers = [bytearray(64) for _ in range(16)]
        self.config = {"batch": 32, "shuffle": True}


def _worker(stop: threading.Event, loader: _Loader, depth: int) -> None:
    local_a, local_b, local_c = list(range(32)), {"k": 1}, "text"  # noqa: F841 - locals the look walks over
    if depth:
        _worker(stop, loader, depth - 1)
        return
    stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--depth", type=int, default=6, help="frames per thread")
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    stop = threading.Event()
    shared: queue.Queue = queue.Queue(maxsize=8)
    threads = [threading.Thread(target=_worker, args=(stop, _Loader(shared), args.depth), daemon=True)
               for _ in range(args.threads)]
    for t in threads:
        t.start()
    time.sleep(0.2)
    session = _Session()
    times_us = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        discover_objects(session, queues=True, models=False)
        times_us.append((time.perf_counter() - t0) * 1e6)
    stop.set()
    times_us.sort()
    print(f"{platform.machine()} {platform.python_version()}, {args.threads} threads x {args.depth + 1} frames: "
          f"one look {statistics.median(times_us):.0f} us median, p95 {times_us[int(0.95 * len(times_us))]:.0f} us "
          f"({args.repeat} looks); found {sorted(session.queues)}")


if __name__ == "__main__":
    main()
