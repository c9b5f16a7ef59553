"""How long ``dflash-diag snapshot`` takes on a live multi-threaded process (budget: <= 3 s on 16 threads).

Starts one target process, waits until it runs, then takes ``--rounds`` snapshots of it back to back, each
through the real command line (``python -m dflash_diag snapshot PID -o ... --force``), timing the whole
command (interpreter start-up included) and reading the snapshot's own elapsed time from ``--json``.

Targets:
  --target workload   tests/fixtures/cpu/pipeline_child.py --light --probes --threads N/2 (N/2 target + N/2
                      drafter threads, no torch)
  --target trainer    the reference trainer (tiny preset on CPU, auto on GPU) with N/2 target and N/2 drafter
                      devices (--device cpu or cuda:0...: threads share the device)

  .venv/bin/python bench/snapshot_time.py --target workload --threads 16 --rounds 5
  .venv/bin/python bench/snapshot_time.py --target trainer --threads 16 --rounds 5 --json out.json

Prints a table and a JSON document (stdout, or --json PATH).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
WORKLOAD = ROOT / "tests" / "fixtures" / "cpu" / "pipeline_child.py"


def _threads_of(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return 0


def _start(args: argparse.Namespace, board_dir: str) -> subprocess.Popen[str]:
    env = {**os.environ, "DFLASH_DIAG_BOARD_DIR": board_dir, "PYTHONPATH": str(ROOT)}
    half = max(1, args.threads // 2)
    if args.target == "workload":
        cmd = [sys.executable, str(WORKLOAD), "--light", "--probes", "--threads", str(half), "--max-s", "600"]
    else:
        devices = ",".join([args.device] * half)
        cmd = [sys.executable, "-m", "reference_trainer", "--preset", args.preset, "--wandb", "off",
               "--max-seconds", "600", "--target-devices", devices, "--drafter-devices", devices,
               "--checkpoint-dir", tempfile.mkdtemp(prefix="snapbench-ckpt-")]
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)


def _wait_running(proc: subprocess.Popen[str], board_dir: str, timeout_s: float) -> None:
    board = Path(board_dir) / f"{proc.pid}.json"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"target exited early (rc {proc.returncode})")
        try:
            app = json.loads(board.read_text()).get("app") or {}
            if (app.get("step") or 0) >= 3 or "use_reentrant" in json.dumps(app):
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.5)
    raise SystemExit("target did not start in time")


def _stack_samples(bundle: str) -> int | None:
    """How many stack samples the bundle's sampling window got (snapshot.json: sampling.stack_samples)."""
    with tarfile.open(bundle) as tar:
        member = next((m for m in tar.getmembers() if m.name.endswith("/snapshot.json")), None)
        handle = tar.extractfile(member) if member is not None else None
        return json.load(handle).get("sampling", {}).get("stack_samples") if handle is not None else None


def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="snapbench-") as tmp:
        board_dir = os.path.join(tmp, "boards")
        os.mkdir(board_dir, 0o700)
        proc = _start(args, board_dir)
        try:
            _wait_running(proc, board_dir, args.start_timeout_s)
            time.sleep(args.settle_s)
            rounds = []
            for i in range(args.rounds):
                out = os.path.join(tmp, f"snap{i}.tar.gz")
                t0 = time.monotonic()
                res = subprocess.run([sys.executable, "-m", "dflash_diag", "snapshot", str(proc.pid), "-o", out,
                                      "--force", "--json",
                                      *(["--duration", str(args.duration)] if args.duration is not None else [])],
                                     cwd=ROOT, env={**os.environ, "DFLASH_DIAG_BOARD_DIR": board_dir},
                                     capture_output=True, text=True, check=False)
                wall_s = time.monotonic() - t0
                if res.returncode != 0:
                    raise SystemExit(f"snapshot failed: {res.stderr.strip()}")
                doc = json.loads(res.stdout)
                rounds.append({"command_wall_s": round(wall_s, 3), "snapshot_s": doc["elapsed_s"],
                               "threads": _threads_of(proc.pid), "missing": [m["what"] for m in doc["missing"]],
                               "bundle_bytes": os.path.getsize(out), "stack_samples": _stack_samples(out)})
        finally:
            proc.kill()
            proc.wait(timeout=30)
    snap = [r["snapshot_s"] for r in rounds]
    wall = [r["command_wall_s"] for r in rounds]
    return {
        "target": args.target, "threads_requested": args.threads, "duration_s": args.duration,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "host": platform.node()},
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "snapshot_s_median": round(statistics.median(snap), 3), "snapshot_s_max": round(max(snap), 3),
        "command_wall_s_median": round(statistics.median(wall), 3), "command_wall_s_max": round(max(wall), 3),
        "stack_samples_median": statistics.median(r["stack_samples"] or 0 for r in rounds),
        "rounds": rounds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", choices=("workload", "trainer"), default="workload")
    parser.add_argument("--threads", type=int, default=16, help="worker threads of the target (half each stage)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=float, default=None, help="snapshot --duration (default: the command's)")
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--settle-s", type=float, default=3.0)
    parser.add_argument("--start-timeout-s", type=float, default=300.0)
    parser.add_argument("--json", metavar="PATH", help="write the JSON document here instead of stdout")
    args = parser.parse_args()
    result = run(args)
    print(f"{'round':>5} {'threads':>7} {'snapshot s':>10} {'command s':>9} {'samples':>7}  missing", file=sys.stderr)
    for i, r in enumerate(result["rounds"]):
        print(f"{i:>5} {r['threads']:>7} {r['snapshot_s']:>10.2f} {r['command_wall_s']:>9.2f} {r['stack_samples']:>7}  "
              f"{', '.join(r['missing']) or '-'}", file=sys.stderr)
    print(f"median snapshot {result['snapshot_s_median']:.2f} s (max {result['snapshot_s_max']:.2f} s); "
          f"whole command {result['command_wall_s_median']:.2f} s; {result['stack_samples_median']} stack samples",
          file=sys.stderr)
    text = json.dumps(result, indent=1)
    if args.json:
        Path(args.json).write_text(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main()
