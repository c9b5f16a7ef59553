"""What one fork of a large process costs the parent, and what subprocess's vfork path costs instead: the figure
`fork-cost` counts a forking thread's kernel time against (dflash_diag/analysis/findings/scheduler.py,
FORK_COPY_S_PER_GIB).

  .venv/bin/python bench/fork_cost.py                  # 0.5 GiB resident, 10 forks each way
  .venv/bin/python bench/fork_cost.py --gib 1 --forks 20
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import time


def _median_ms(fn: object, n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t0)
    return round(1e3 * statistics.median(times), 2)


def _fork_ms(n: int) -> float:
    """The parent's os.fork() call alone (the page tables copied), the child reaped outside the timing."""
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        times.append(time.perf_counter() - t0)
        os.waitpid(pid, 0)
    return round(1e3 * statistics.median(times), 2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gib", type=float, default=0.5, help="resident memory to hold while forking")
    parser.add_argument("--forks", type=int, default=10)
    args = parser.parse_args()
    held = bytearray(int(args.gib * 2**30))
    for i in range(0, len(held), 4096):  # resident, every page
        held[i] = 1
    fork_ms = _fork_ms(args.forks)
    vfork_ms = _median_ms(lambda: subprocess.run(["true"], check=True), args.forks)
    result = {"command": "python bench/fork_cost.py " + f"--gib {args.gib:g} --forks {args.forks}",
              "machine": f"{platform.node()} ({os.cpu_count()} CPUs), load average {os.getloadavg()[0]:.1f}",
              "resident_gib": args.gib, "os_fork_ms_median": fork_ms, "subprocess_vfork_ms_median": vfork_ms,
              "fork_ms_per_gib": round(fork_ms / args.gib, 2)}
    print(f"os.fork of a {args.gib:g} GiB process: {fork_ms} ms (median of {args.forks}); subprocess.run (vfork): "
          f"{vfork_ms} ms; {result['fork_ms_per_gib']} ms a fork per GiB")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
