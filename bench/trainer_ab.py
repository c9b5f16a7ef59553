"""Two commits of the reference trainer side by side: same command, alternating runs, median tok/s ratio.

    python bench/trainer_ab.py --old 19dcd48 --new HEAD --rounds 6 -- --preset tiny --max-steps 200

Each commit's tree is exported with ``git archive`` into a private temp directory (the repository and its
work tree are only read), then ``python -m reference_trainer ARGS --summary-json`` runs from each tree in
turn, the order swapped every round (ABBA...). tok/s is the trainer's own summary figure (unpadded tokens
the drafter trained on, first step excluded). The figure to read is the median over rounds of the paired
ratio new/old: rounds run back to back, so a busy machine slows both sides of a pair alike.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXPORTED = ("reference_trainer", "probes")


def export(rev: str, into: Path) -> str:
    """The trainer and probes packages of ``rev`` under ``into``; returns the full commit id."""
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", f"{rev}^{{commit}}"],
                            capture_output=True, text=True, check=True).stdout.strip()
    into.mkdir(mode=0o700)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", commit, *EXPORTED],
                             capture_output=True, check=True).stdout
    archive_path = into.parent / f"{into.name}.tar"
    archive_path.write_bytes(archive)
    with tarfile.open(archive_path) as tar:
        tar.extractall(into, filter="data")
    archive_path.unlink()
    return commit


def run_once(tree: Path, trainer_args: list[str], work: Path) -> float:
    summary = work / "summary.json"
    env = {**os.environ, "PYTHONPATH": str(tree), "WANDB_MODE": "disabled",
           "DFLASH_DIAG_BOARD_DIR": str(work / "board")}
    cmd = [sys.executable, "-m", "reference_trainer", *trainer_args, "--wandb", "off", "--probes", "none",
           "--checkpoint-dir", str(work / "ckpt"), "--summary-json", str(summary)]
    proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise SystemExit(f"{tree.name}: trainer exit {proc.returncode}: {proc.stderr[-2000:]}")
    return float(json.loads(summary.read_text())["tokens_per_s"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", required=True, help="baseline revision")
    parser.add_argument("--new", default="HEAD", help="revision to compare (default HEAD)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--json", help="write every run and the medians here")
    parser.add_argument("trainer_args", nargs="*", help="trainer arguments (after --), e.g. --preset tiny")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    trainer_args = args.trainer_args or ["--preset", "tiny", "--max-steps", "200"]
    with tempfile.TemporaryDirectory(prefix="trainer-ab-") as tmp:
        trees = {"old": Path(tmp) / "old", "new": Path(tmp) / "new"}
        commits = {side: export(getattr(args, side), tree) for side, tree in trees.items()}
        runs: dict[str, list[float]] = {"old": [], "new": []}
        for round_index in range(args.rounds):
            order = ("old", "new") if round_index % 2 == 0 else ("new", "old")
            for side in order:
                work = Path(tmp) / f"work-{side}-{round_index}"
                work.mkdir()
                runs[side].append(run_once(trees[side], trainer_args, work))
            print(f"round {round_index}: old {runs['old'][-1]:,.0f} tok/s, new {runs['new'][-1]:,.0f} tok/s, "
                  f"new/old {runs['new'][-1] / runs['old'][-1]:.3f}", flush=True)
    ratios = [n / o for n, o in zip(runs["new"], runs["old"], strict=True)]
    result: dict[str, Any] = {"commits": commits, "trainer_args": trainer_args, "runs": runs, "ratios": ratios,
                              "old_median_tokens_per_s": statistics.median(runs["old"]),
                              "new_median_tokens_per_s": statistics.median(runs["new"]),
                              "median_ratio_new_over_old": statistics.median(ratios)}
    print(f"old {commits['old'][:10]}: median {result['old_median_tokens_per_s']:,.0f} tok/s; "
          f"new {commits['new'][:10]}: median {result['new_median_tokens_per_s']:,.0f} tok/s; "
          f"median paired ratio new/old {result['median_ratio_new_over_old']:.3f} "
          f"(range {min(ratios):.3f}-{max(ratios):.3f})")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
