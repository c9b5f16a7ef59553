"""What the environment read (``sources.env_reads``, every live `doctor` window) costs doctor, on a real process.

The process: a program that sets a variable itself (only its memory has it) and imports SymPy, then sleeps. Timed,
``--rounds`` times each, median: reading its environment (/proc/PID/environ and its memory, ``process_environ``), and
scanning six installed directories for the variables' names (``env_reads``; SymPy's core, protobuf's internals,
numpy's core, three of transformers': the file cache warm after the first round). No stop of the process: both read
from outside. Prints one line of medians.

  .venv/bin/python bench/env_reads_cost.py --rounds 7
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dflash_diag.sources.env_reads import env_reads, process_environ  # noqa: E402

PROGRAM = "import os, time\nos.environ['SYMPY_CACHE_SIZE'] = '16'\nimport sympy\nprint('READY', flush=True)\ntime.sleep(600)\n"
DIRS = ("sympy/core", "google/protobuf/internal", "numpy/_core", "transformers", "transformers/utils",
        "transformers/models/llama")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    site = next(p for p in sys.path if p.endswith("site-packages") and Path(p, "sympy").is_dir())
    dirs = [str(Path(site, d)) for d in DIRS if Path(site, d).is_dir()]
    proc = subprocess.Popen([sys.executable, "-c", PROGRAM], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
        environ_ms, scan_ms, found = [], [], ()
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            env = process_environ(proc.pid)
            t1 = time.perf_counter()
            found = env_reads(env, dirs)
            t2 = time.perf_counter()
            environ_ms.append((t1 - t0) * 1e3)
            scan_ms.append((t2 - t1) * 1e3)
    finally:
        proc.kill()
        proc.wait()
    print(f"environ read {statistics.median(environ_ms):.1f} ms, scan of {len(dirs)} directories "
          f"{statistics.median(scan_ms):.1f} ms (medians of {args.rounds}); found: "
          + ", ".join(f"{r.name}={r.value} ({r.reader})" for r in found))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
