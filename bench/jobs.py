"""Score `dflash-diag doctor --json` on the casebook's torchrun jobs: every case attached from outside and under
`dflash-diag run`, doctor given the launcher's PID and a rank's (docs/jobs.md).

For every (case, mode, PID): is every expected rule named, is the headline the planted cause, does the healthy
job get any warning, and how long from starting doctor to its answer (the goal: under 10 s for a 4-rank job, its
5 s window included)? Prints the table, and writes it (`jobs.md`) with the raw results (`jobs.json`) to --out.
Exits 1 on a miss, a warning on the healthy job or an answer of 10 s or more (measure with the box to itself).

  .venv/bin/python bench/jobs.py                                   # every case, both modes, both PIDs (~10 min)
  .venv/bin/python bench/jobs.py --cases ddp_straggler --modes outside --targets rank
  .venv/bin/python bench/jobs.py --ci-runs --record tests/casebook/observations/jobs
                                   # CI's four job runs (tests/casebook/test_jobs.py), each observation kept as the
                                   # fixture CI replays: after a change to what an observation holds, or to a job
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "casebook"))

from cases import JOB_CASES, Case  # noqa: E402
from harness import MODES, TIME_TO_NAME_S, Recording, Result, run_case  # noqa: E402


def _rank_target(case: Case) -> str:
    """The rank doctor is given: the one the case's CI run uses, else the last rank."""
    named = [t for t in case.targets.values() if t.startswith("rank:")]
    if named:
        return named[0]
    ranks = int(case.argv[case.argv.index("--nproc-per-node") + 1])
    return f"rank:{ranks - 1}"


def _row(r: Result, ranks: int) -> str:
    verdict = "ok" if r.ok and r.seconds_to_answer < TIME_TO_NAME_S else "MISS"
    what = r.error[:80] if r.error else (r.headline_text[:110] or "no headline")
    return (f"| {r.case} | {r.mode} | {r.target} | {ranks} | {verdict} | {', '.join(r.named) or '-'} | "
            f"{r.seconds_to_answer:.1f} | {what.replace('|', '/')} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default="", help="comma list of case names (default: all)")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--targets", default="launcher,rank", help="launcher, rank, or both")
    parser.add_argument("--out", type=Path, default=None, help="directory for jobs.md and jobs.json")
    parser.add_argument("--ci-runs", action="store_true", help="only CI's (case, mode, PID) runs (test_jobs.CI_RUNS)")
    parser.add_argument("--record", type=Path, metavar="DIR", help="keep each run's observation in DIR as a gzip'd, "
                        "redacted fixture (<case>__<mode>.json.gz; one PID per (case, mode): use with --ci-runs)")
    args = parser.parse_args()
    wanted = {c for c in args.cases.split(",") if c}
    cases = [c for c in JOB_CASES if not wanted or c.name in wanted]
    record = None
    if args.record is not None:
        args.record.mkdir(mode=0o700, parents=True, exist_ok=True)
        record = Recording(args.record, fixtures=True)
    if args.ci_runs:
        return _ci_runs(cases, record)
    modes = [m for m in args.modes.split(",") if m]
    kinds = [k for k in args.targets.split(",") if k]
    results: list[tuple[Result, int]] = []
    t0 = time.monotonic()
    for case in cases:
        ranks = int(case.argv[case.argv.index("--nproc-per-node") + 1])
        for mode in (m for m in modes if m in case.modes):  # a job has no attach mode
            for kind in kinds:
                target = "launcher" if kind == "launcher" else _rank_target(case)
                r = run_case(case, mode, target=target)
                results.append((r, ranks))
                print(f"[{time.monotonic() - t0:5.0f} s] {_row(r, ranks)}", file=sys.stderr, flush=True)
    lines = [
        f"Jobs casebook, {dt.date.today().isoformat()}, {platform.node() or 'this machine'} "
        f"({os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f} at the end), `{' '.join(sys.argv)}`",
        "",
        "| case | mode | PID given | ranks | verdict | named | s to answer | headline |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
        *(_row(r, n) for r, n in results),
    ]
    misses = [r for r, _ in results if not r.ok or r.seconds_to_answer >= TIME_TO_NAME_S]
    four = [r.seconds_to_answer for r, n in results if n == 4 and not r.error]
    lines += ["", f"{len(results) - len(misses)} of {len(results)} ok; 4-rank answers: "
                  + (f"max {max(four):.1f} s, mean {sum(four) / len(four):.1f} s" if four else "none")]
    print("\n".join(lines))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "jobs.md").write_text("\n".join(lines) + "\n")
        (args.out / "jobs.json").write_text(json.dumps([{**r.row(), "ranks": n} for r, n in results], indent=1))
    return 1 if misses else 0


def _ci_runs(cases: list[Case], record: Recording | None) -> int:
    """CI's four runs (tests/casebook/test_jobs.py), each with its PID; a miss runs once more (a starved box)."""
    from test_jobs import CI_RUNS

    by_name = {c.name: c for c in cases}
    misses = 0
    for name, mode in CI_RUNS:
        case = by_name.get(name)
        if case is None:
            continue
        r = run_case(case, mode, target=case.targets[mode], record=record)
        if not r.ok:
            r = run_case(case, mode, target=case.targets[mode], record=record)
        misses += not r.ok
        print(_row(r, int(case.argv[case.argv.index("--nproc-per-node") + 1])), flush=True)
    return 1 if misses else 0


if __name__ == "__main__":
    raise SystemExit(main())
