"""What one /proc sweep of a process costs the tool now that it lists the files the process holds open
(sources/procfs.read_process: RSS, threads, descriptors, and each descriptor's link up to the first 64 files on a
disk; analysis.sched.reopened_files reads the lists).

A child process is started and kept running: on a CUDA machine it initialises CUDA and keeps a tensor on the GPU (the
driver's device files are among its descriptors), elsewhere it trains a small model on the CPU; either way it holds
--files regular files open. Then read_process(child) is timed --calls times: wall time per call, median and p90, and
what one reading saw (descriptors, files listed).

  .venv/bin/python bench/fd_listing_cost.py                   # prints a markdown table and JSON
  python bench/fd_listing_cost.py --files 200 --calls 500     # on the GPU machine (CUDA child when torch sees one)
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dflash_diag.sources import procfs  # noqa: E402

_CHILD = r"""
import os, sys, time
import torch
files = [open(os.path.join(sys.argv[1], f"shard-{i}.bin"), "wb") for i in range(int(sys.argv[2]))]
cuda = torch.cuda.is_available()
device = "cuda" if cuda else "cpu"
model = torch.nn.Linear(256, 256).to(device)
x = torch.randn(64, 256, device=device)
print("ready", "cuda" if cuda else "cpu", flush=True)
while True:
    model(x).sum().backward()
    if cuda:
        torch.cuda.synchronize()  # a sync per step: the host waits for the step, as a small trainer does
    time.sleep(0.001)
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=200, help="regular files the child holds open (default 200)")
    ap.add_argument("--calls", type=int, default=300, help="timed read_process calls (default 300)")
    args = ap.parse_args()
    if args.files < 0 or args.calls < 1:
        print("fd_listing_cost.py: --files must be >= 0 and --calls >= 1", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="fd-listing-") as tmp:
        child = subprocess.Popen([sys.executable, "-c", _CHILD, tmp, str(args.files)], stdout=subprocess.PIPE,
                                 text=True)
        try:
            assert child.stdout is not None
            ready = child.stdout.readline().split()
            if not ready or ready[0] != "ready":
                print("fd_listing_cost.py: the child did not start", file=sys.stderr)
                return 1
            kind = ready[1]
            times_ms = []
            sample = procfs.read_process(child.pid)
            for _ in range(args.calls):
                t0 = time.perf_counter()
                procfs.read_process(child.pid)
                times_ms.append(1e3 * (time.perf_counter() - t0))
        finally:
            child.kill()
            child.wait()
    times_ms.sort()
    result = {
        "command": "python bench/fd_listing_cost.py " + " ".join(sys.argv[1:]),
        "date_utc": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M"),
        "machine": {"host": platform.node(), "python": platform.python_version(), "child": kind},
        "descriptors": sample.open_fds, "files_listed": len(sample.files_open or ()),
        "median_ms": round(statistics.median(times_ms), 3),
        "p90_ms": round(times_ms[int(0.9 * (len(times_ms) - 1))], 3), "calls": args.calls,
    }
    print("| child | descriptors | files listed | read_process median (ms) | p90 (ms) | calls |")
    print("|---|---|---|---|---|---|")
    print(f"| {kind} | {result['descriptors']} | {result['files_listed']} | {result['median_ms']} | "
          f"{result['p90_ms']} | {args.calls} |")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
