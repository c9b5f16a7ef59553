"""The seed's layout in small: several target and drafter threads, probes on, with `top --batch`, `doctor`
and `snapshot` attached to the live trainer. Checks what issue 6 asks of a multi-GPU run: each thread is
attributed to its device, per-GPU utilisation and the stage verdict agree with the queue evidence, and the
drafter replicas stay identical (``replica_max_abs_diff`` in the trainer's summary).

    python bench/multi_device_session.py --out out/ --preset qwen3.5-4b \\
        --target-devices cuda:0,cuda:1 --drafter-devices cuda:2,cuda:3          # 4 GPUs: 2 + 2
    python bench/multi_device_session.py --out out/ --preset qwen3.5-4b \\
        --target-devices cuda:0,cuda:0 --drafter-devices cuda:0,cuda:0          # one GPU, two threads a stage
    python bench/multi_device_session.py --out out/ --preset tiny \\
        --target-devices cpu,cpu --drafter-devices cpu,cpu                      # CPU dry run

Writes into --out: summary.json (trainer), top.json, doctor.json, snapshot.tar.gz, pyspy_native.json (one
native dump, a fixture for the classifier) and session.json (the checks below, with timings).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dflash_diag.errors import BoardError  # noqa: E402
from dflash_diag.sources.board import read_board  # noqa: E402
from dflash_diag.sources.pyspy_find import find_pyspy  # noqa: E402


def _diag(*args: str, timeout_s: float) -> tuple[int, str, float]:
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "dflash_diag", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout_s)
    if proc.returncode not in (0, 10):
        print(f"dflash-diag {args[0]} exited {proc.returncode}: {proc.stderr.strip()[-400:]}", file=sys.stderr)
    return proc.returncode, proc.stdout, time.monotonic() - t0


def _wait_for_steps(pid: int, board_dir: Path, steps: int, timeout_s: float) -> dict[str, Any]:
    """Block until the trainer's board shows ``steps`` drafter steps (model build and compile are over)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            app = dict(read_board(pid, board_dir=str(board_dir)).app)
            if int(app.get("step") or 0) >= steps:
                return app
        except BoardError:
            pass
        time.sleep(1.0)
    raise SystemExit(f"trainer did not reach step {steps} within {timeout_s:.0f} s")


def _checks(top: dict[str, Any], doctor: dict[str, Any], summary: dict[str, Any]) -> dict[str, Any]:
    threads = {t["name"]: t for t in top.get("threads", [])}
    devices = {name: info.get("device") for name, info in summary.get("threads", {}).items()}
    attributed = {name: threads.get(name, {}).get("gpu_index") for name in devices}
    return {
        "thread_devices": devices,
        "top_gpu_index_per_thread": attributed,
        "every_cuda_thread_attributed": all(
            attributed[n] is not None for n, d in devices.items() if str(d).startswith("cuda")),
        "pipeline_verdict": top.get("pipeline", {}).get("verdict"),
        "gpus": top.get("gpus"),
        "doctor_rules": [f["rule_id"] for f in doctor.get("findings", [])],
        "replica_max_abs_diff": summary.get("replica_max_abs_diff"),
        "tokens_per_s": summary.get("tokens_per_s"),
        "target_batches_per_s": summary.get("target_batches_per_s"),
        "drafter_batches_per_s": summary.get("drafter_batches_per_s"),
        "queue_depth_mean": summary.get("queue_depth_mean"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--target-devices", default="cpu,cpu")
    parser.add_argument("--drafter-devices", default="cpu,cpu")
    parser.add_argument("--warmup-steps", type=int, default=8, help="steps before the tools attach")
    parser.add_argument("--max-seconds", type=float, default=150.0, help="the trainer's whole run")
    parser.add_argument("--sample-s", type=float, default=8.0, help="top --batch and doctor durations")
    parser.add_argument("--start-timeout-s", type=float, default=240.0)
    args = parser.parse_args()

    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    board_dir = out / "boards"
    board_dir.mkdir(mode=0o700, exist_ok=True)
    env = {**os.environ, "DFLASH_DIAG_BOARD_DIR": str(board_dir), "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "reference_trainer", "--preset", args.preset, "--target-devices",
           args.target_devices, "--drafter-devices", args.drafter_devices, "--max-seconds", str(args.max_seconds),
           "--summary-json", str(out / "summary.json"), "--checkpoint-dir", str(out / "ckpt"), "--wandb", "off",
           "--log-interval", "5"]
    log = open(out / "trainer.log", "w")  # lives as long as the child
    trainer = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    timings: dict[str, float] = {}
    try:
        _wait_for_steps(trainer.pid, board_dir, args.warmup_steps, args.start_timeout_s)
        diag = ("--board-dir", str(board_dir))
        rc, top_out, timings["top_s"] = _diag("top", "--pid", str(trainer.pid), "--batch", "--duration",
                                              str(args.sample_s), "--json", *diag, timeout_s=120)
        (out / "top.json").write_text(top_out)
        rc, doc_out, timings["doctor_s"] = _diag("doctor", str(trainer.pid), "--duration", str(args.sample_s),
                                                 "--json", *diag, timeout_s=120)
        (out / "doctor.json").write_text(doc_out)
        rc, _, timings["snapshot_s"] = _diag("snapshot", str(trainer.pid), "-o", str(out / "snapshot.tar.gz"),
                                             "--force", *diag, timeout_s=60)
        native = subprocess.run([find_pyspy(), "dump", "--native", "--json", "--pid", str(trainer.pid)],
                                capture_output=True, text=True, timeout=60)
        (out / "pyspy_native.json").write_text(native.stdout or json.dumps({"error": native.stderr}))
        trainer.wait(timeout=args.max_seconds + 120)
    finally:
        if trainer.poll() is None:
            trainer.terminate()
            trainer.wait(timeout=60)
        log.close()
    summary = json.loads((out / "summary.json").read_text())
    top = json.loads((out / "top.json").read_text() or "{}")
    doctor = json.loads((out / "doctor.json").read_text() or "{}")
    session = {"command": cmd, "exit_code": trainer.returncode, "timings": timings, **_checks(top, doctor, summary)}
    (out / "session.json").write_text(json.dumps(session, indent=2))
    print(json.dumps(session, indent=2))
    return 0 if trainer.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
