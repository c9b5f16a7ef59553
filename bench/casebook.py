"""Score `dflash-diag doctor --json` on the casebook: threaded training programs we did not write, one planted cause
each (or none), attached from outside, under `dflash-diag run` and (the cases that list the mode) with probes
attached once the program runs (`dflash-diag attach PID --probes ...`, then `doctor`).

For every (program, mode): is every expected rule named? is the headline the planted cause (or the symptom it
explains, with that cause first)? does a healthy program get any warning? how long from starting `doctor` to
its answer? Prints the table, and writes it (`casebook.md`) with the raw results (`casebook.json`) to --out.
Exits 1 when a cause is missed, a healthy program gets a warning or an answer takes 10 s or more (the
time-to-name goal; measure it with the box to itself).

  .venv/bin/python bench/casebook.py                      # CPU cases, both modes (~4 min on 2 busy cores)
  .venv/bin/python bench/casebook.py --cases gil_hog_side_thread,hang_dead_consumers --modes outside
  .venv/bin/python bench/casebook.py --family health     # the training-health cases (probes and attach modes)
  python bench/casebook.py --gpu --out /tmp/casebook-h200  # on the GPU machine: GPU cases, the healthy
                                                           # programs on CUDA and the reference trainer's
                                                           # qwen3.5-4b preset (< 5 min on one H200)
  .venv/bin/python bench/casebook.py --gpu --dry-run      # the same plumbing on CPU (expectations will not hold)

GPU runs are phased so that one program's GPU load does not hide another's: the programs whose rules read
stacks run a few at a time, the GPU-utilisation case runs alone, then the reference trainer (both modes
together; it needs a minute to compile its first steps).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "casebook"))

from cases import CASES, REFERENCE_TRAINER, Case  # noqa: E402
from harness import MODES, TIME_TO_NAME_S, Result, run_all  # noqa: E402

GPU_ALONE = ("gpu_launch_bound",)  # reads device-wide NVML utilisation: nothing else may use the GPU meanwhile


def _select(args: argparse.Namespace) -> list[Case]:
    names = set(args.cases.split(",")) if args.cases else None
    if args.gpu:
        chosen = [c for c in CASES if c.gpu or c.both]
        if not args.no_reference:
            chosen.append(REFERENCE_TRAINER)
    else:
        chosen = [c for c in CASES if not c.gpu]
    if args.split == "tuning":
        chosen = [c for c in chosen if not c.held_out]
    elif args.split == "held-out":
        chosen = [c for c in chosen if c.held_out]
    if args.family:
        chosen = [c for c in chosen if c.family in (args.family, f"healthy ({args.family})")]
    if names is not None:
        unknown = names - {c.name for c in chosen}
        if unknown:
            raise SystemExit(f"bench/casebook.py: unknown case(s) for this mode: {', '.join(sorted(unknown))}")
        chosen = [c for c in chosen if c.name in names]
    return chosen


def _progress(t0: float, out: Path | None) -> Any:
    """One line per result on stderr, and (with --out) its row appended to results.jsonl: a run cut short by a
    time limit still leaves every answer it got."""
    def show(r: Result) -> None:
        status = "ok" if r.ok else "MISS"
        print(f"[{time.monotonic() - t0:5.0f} s] {status:4} {r.case} ({r.mode}): "
              f"{r.error[:120] if r.error else (r.headline_text[:120] or 'no headline')}", file=sys.stderr, flush=True)
        if out is not None:
            with (out / "results.jsonl").open("a") as f:
                f.write(json.dumps(r.row()) + "\n")
    return show


def run(args: argparse.Namespace) -> list[Result]:
    cases = _select(args)
    modes = tuple(m for m in args.modes.split(",") if m)
    t0 = time.monotonic()
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
    show = _progress(t0, args.out)
    if not args.gpu:
        return run_all(cases, modes, parallel=args.parallel, duration_s=args.duration, progress=show)
    device = ("--device", "cpu") if args.dry_run else ("--device", "cuda")
    timeout = 90.0 if args.dry_run else None
    shared = [c for c in cases if c.name not in GPU_ALONE and c is not REFERENCE_TRAINER]
    alone = [c for c in cases if c.name in GPU_ALONE]
    results = run_all(shared, modes, parallel=args.parallel, duration_s=args.duration, progress=show,
                      extra_args=device, ready_timeout_s=timeout)
    results += run_all(alone, modes, parallel=1, duration_s=args.duration, progress=show, extra_args=device,
                       ready_timeout_s=timeout)
    if REFERENCE_TRAINER in cases:
        preset = ("--preset", "tiny") if args.dry_run else ()
        results += run_all([REFERENCE_TRAINER], modes, parallel=2, duration_s=args.duration, progress=show,
                           extra_args=preset, ready_timeout_s=timeout)
    return results


def table(results: list[Result]) -> str:
    rows = ["| program | mode | planted cause | expected rules | named | headline | headline right | warnings "
            "| seconds to answer |", "|---|---|---|---|---|---|---|---|---|"]
    causes = {c.name: c for c in (*CASES, REFERENCE_TRAINER)}
    for r in results:
        case = causes[r.case]
        expected = ", ".join(f"`{x}`" for x in r.expected) or ("none (healthy)" if r.healthy_case else "-")
        if r.error:
            named, head, right = "error", r.error[:60].replace("|", "/"), "no"
        else:
            named = "yes" if r.all_named else f"no ({', '.join(r.named) or 'none'})"
            head = (f"`{r.headline_rule}`" + (f" because `{r.headline_because[0]}`" if r.headline_because else "")
                    if r.headline_rule else "none")
            right = "yes" if r.headline_ok else "NO"
        warnings = ", ".join(f"`{w}`" for w in r.warnings) or "none"
        if r.healthy_case and r.warnings:
            warnings = f"**{warnings}**"
        rows.append(f"| {r.case}{' (GPU)' if case.gpu else ''}{' (held out)' if case.held_out else ''} | {r.mode}{f' ({r.attach_method})' if r.attach_method else ''} | {case.cause} | {expected} | "
                    f"{named if not r.healthy_case else '-'} | {head} | {right if not r.healthy_case else '-'} | "
                    f"{warnings} | {r.seconds_to_answer:.1f} |")
    return "\n".join(rows)


def summary(results: list[Result]) -> dict[str, Any]:
    """Per mode, and per mode for the held-out cases alone (written last, scored once: what predicts users)."""
    held_out = {c.name for c in CASES if c.held_out}
    out: dict[str, Any] = {}
    for mode, split in [(m, "") for m in MODES] + [(m, "held-out") for m in MODES]:
        rows = [r for r in results if r.mode == mode and (not split or r.case in held_out)]
        if not rows:
            continue
        planted = [r for r in rows if not r.healthy_case]
        healthy = [r for r in rows if r.healthy_case]
        out[f"{mode} ({split})" if split else mode] = {
            "causes_named": sum(1 for r in planted if r.all_named and not r.error), "causes": len(planted),
            "headlines_right": sum(1 for r in planted if r.headline_ok and not r.error),
            "healthy_with_warnings": sum(1 for r in healthy if r.warnings or r.error), "healthy": len(healthy),
            "max_seconds_to_answer": max((r.seconds_to_answer for r in rows), default=0.0),
        }
    return out


def _machine() -> dict[str, Any]:
    info: dict[str, Any] = {"host": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version()}
    try:
        import torch

        info["torch"] = torch.__version__
        info["cuda"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except ImportError:
        info["torch"] = None
    try:
        info["load_avg"] = os.getloadavg()
    except OSError:
        pass
    return info


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpu", action="store_true", help="the GPU cases, the healthy programs on CUDA and the "
                        "reference trainer (qwen3.5-4b)")
    parser.add_argument("--dry-run", action="store_true", help="with --gpu: run everything on CPU (plumbing check)")
    parser.add_argument("--no-reference", action="store_true", help="with --gpu: skip the reference trainer")
    parser.add_argument("--cases", help="comma list of case names (default: all of the chosen kind)")
    parser.add_argument("--modes", default=",".join(MODES), help="comma list of outside, probes, attach (default all three; each case runs in the modes it lists)")
    parser.add_argument("--family", help="only the cases of this family (and its healthy ones): e.g. health")
    parser.add_argument("--attach-method", help="attach mode's method: auto (default), ptrace, gdb, cuda-gdb, lldb, "
                        "remote-exec")
    parser.add_argument("--parallel", type=int, default=None, help="programs at a time (default 2 on CPU, 4 --gpu)")
    parser.add_argument("--duration", type=float, default=5.0, help="doctor --duration (default 5 s, its default)")
    parser.add_argument("--out", type=Path, help="write casebook.json and casebook.md here")
    parser.add_argument("--split", choices=("all", "tuning", "held-out"), default="all",
                        help="which cases: the held-out ones are written last and scored once, without tuning on "
                        "them (default all; tune with --split tuning)")
    args = parser.parse_args()
    if args.parallel is None:
        args.parallel = 4 if args.gpu and not args.dry_run else 2
    bad = set(args.modes.split(",")) - set(MODES)
    if bad:
        parser.error(f"unknown mode(s): {', '.join(sorted(bad))}")
    if args.attach_method:
        os.environ["CASEBOOK_ATTACH_METHOD"] = args.attach_method
    started = dt.datetime.now(dt.UTC)
    t0 = time.monotonic()
    results = run(args)
    doc = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "date_utc": started.strftime("%Y-%m-%d %H:%M"),
        "elapsed_s": round(time.monotonic() - t0, 1),
        "machine": _machine(),
        "git": subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True).stdout.strip(),
        "summary": summary(results),
        "results": [r.row() for r in results],
    }
    md = (f"`{doc['command']}` on {doc['machine'].get('cuda') or 'CPU'} ({doc['machine']['cpus']} CPUs, torch "
          f"{doc['machine'].get('torch')}), {doc['date_utc']} UTC, git {doc['git']}, {doc['elapsed_s']:.0f} s\n\n"
          + table(results) + "\n\n" + "\n".join(
              f"- {mode}: {s['causes_named']}/{s['causes']} causes named, {s['headlines_right']}/{s['causes']} "
              f"headlines right, {s['healthy_with_warnings']}/{s['healthy']} healthy programs with a warning, "
              f"slowest answer {s['max_seconds_to_answer']:.1f} s" for mode, s in doc["summary"].items()) + "\n")
    print(md)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "casebook.json").write_text(json.dumps(doc, indent=1) + "\n")
        (args.out / "casebook.md").write_text(md)
        print(f"written: {args.out / 'casebook.md'}, {args.out / 'casebook.json'}", file=sys.stderr)
    missed = [r for r in results if not r.ok]
    slow = [r for r in results if not r.error and r.seconds_to_answer >= TIME_TO_NAME_S]
    for r in slow:
        print(f"slow: {r.case} ({r.mode}) answered in {r.seconds_to_answer:.1f} s, the goal is under "
              f"{TIME_TO_NAME_S:.0f} s", file=sys.stderr)
    return 1 if missed or slow else 0


if __name__ == "__main__":
    raise SystemExit(main())
