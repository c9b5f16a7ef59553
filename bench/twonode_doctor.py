"""How long `doctor` takes to name a two-node job's fault from either node, and what it names.

Starts the casebook's two-node programs (tests/multinode_bed.py: two torchrun launchers on this machine, --nnodes 2,
gloo, two ranks each, every rank under `dflash-diag run`) and runs `dflash-diag doctor LAUNCHER_PID --json` on each
node's launcher, ``--repeats`` times, printing the headline's rule and the command's wall time (the interpreter's
start, finding the job, the window, the mailbox's read and gathering, the judging). ``frozen`` stops rank 3 with
SIGSTOP first.

    .venv/bin/python bench/twonode_doctor.py [--duration 4] [--repeats 3] [SCENARIO ...]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from multinode_bed import two_node_job  # noqa: E402

SCENARIOS = {"healthy": "mn_healthy", "slow": "mn_slow_rank", "missing": "mn_missing_rank", "frozen": "mn_healthy"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    # Checked by hand: with nargs="*", argparse 3.11 checks an empty or default list against choices as one value.
    parser.add_argument("scenarios", nargs="*", help=f"any of {', '.join(SCENARIOS)} (default: all)")
    parser.add_argument("--duration", default="4", help="doctor's window, seconds (default 4)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    args.scenarios = args.scenarios or list(SCENARIOS)
    unknown = [n for n in args.scenarios if n not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario(s) {', '.join(unknown)}: choose from {', '.join(SCENARIOS)}")
    print(f"load average at start: {os.getloadavg()[0]:.1f}")
    for name in args.scenarios:
        with two_node_job(SCENARIOS[name]) as job:
            job.find_ranks()
            job.wait_for(r"\[rank 3\] step 20 ")
            frozen = job.node(1).ranks[3] if name == "frozen" else None
            if frozen is not None:
                os.kill(frozen, signal.SIGSTOP)
            time.sleep(7.0)
            env = {**os.environ, "DFLASH_DIAG_BOARD_DIR": str(job.work / "boards")}
            for node in (0, 1):
                times, rules = [], []
                for _ in range(args.repeats):
                    t0 = time.monotonic()
                    out = subprocess.run([sys.executable, "-m", "dflash_diag", "doctor", str(job.node(node).launcher_pid),
                                          "--json", "--duration", args.duration], env=env, capture_output=True,
                                         text=True, timeout=300)
                    times.append(time.monotonic() - t0)
                    head = json.loads(out.stdout)["headline"] if out.stdout else None
                    rules.append(head["rule_id"] if head else f"exit {out.returncode}")
                print(f"{name:8s} node {node}: {', '.join(sorted(set(rules)))}; wall s median "
                      f"{statistics.median(times):.1f} (min {min(times):.1f}, max {max(times):.1f}), load "
                      f"{os.getloadavg()[0]:.1f}", flush=True)
            if frozen is not None:
                os.kill(frozen, signal.SIGCONT)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
