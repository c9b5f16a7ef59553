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
  .venv/bin/python bench/casebook.py --record tests/casebook/observations
                                   # every CPU case in every mode once, each observation kept as the fixture CI
                                   # replays (tests/casebook/test_casebook_replay.py): after a change to what an
                                   # observation holds, or to a program, or a new case
  python bench/casebook.py --gpu --out /tmp/casebook-h200 --record /tmp/casebook-h200/observations
                                   # on the GPU machine: the GPU cases (batch D and their twins, the first
                                   # GPU cases), the healthy programs on CUDA and the reference trainer's
                                   # qwen3.5-4b preset, outside then attached (~8 min on one H200); each
                                   # answer and its observation kept for CI's replay
  .venv/bin/python bench/casebook.py --gpu --dry-run      # the same plumbing on CPU (expectations will not hold)

GPU runs diagnose a program from outside and then attached to, on one start (harness.run_case_modes), and are
phased so that one program's GPU load does not hide another's:
  1. every program whose rules read stacks, the board or stderr, ``--parallel`` at a time (4), slow starters
     (torch.compile) first; the reference trainer starts with them and warms up (about a minute of compiling);
  2. the reference trainer, diagnosed alone once phase 1 is done, then stopped;
  3. the programs that read device-wide GPU utilisation (``gpu_alone``), one at a time.
``--modes probes`` adds a start under `dflash-diag run` for the cases that list it (the first GPU cases).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "casebook"))

from cases import CASES, REFERENCE_TRAINER, Case  # noqa: E402
from harness import (  # noqa: E402
    MODES,
    SHARED_START,
    TIME_TO_NAME_S,
    ProgramRun,
    Recording,
    Result,
    doctor_can_save_observations,
    run_all,
    run_jobs,
    run_starts,
    starts_for,
)

GPU_MODES = SHARED_START  # the GPU batch's default: outside, then attached, on one start
EST_READY_S = 12.0  # an H200 program's start to its ready line (imports, CUDA context, first steps)
EST_COMPILE_S = 25.0  # more for a program that compiles before it is ready
EST_ATTACH_S = 3.0  # `dflash-diag attach` wall time, CLI start-up included: 2.6 s (docs/benchmarks.md)


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
        return run_cpu(cases, modes, args, show)
    return run_gpu(cases, modes, args, show, t0)


def run_cpu(cases: list[Case], modes: tuple[str, ...], args: argparse.Namespace, show: Any) -> list[Result]:
    """Every CPU (case, mode); with --record, each observation kept as CI's replay fixture (gzip'd, redacted). A
    recorded run that erred or missed where it is not a known miss runs once more, as CI's live lane does: a
    fixture records the program, not a starved box (the table says which ones took a second try)."""
    record = _recording(args)
    results = run_all(cases, modes, parallel=args.parallel, duration_s=args.duration, progress=show, record=record)
    if record is None:
        return results
    by_name = {c.name: c for c in cases}
    again = [(by_name[r.case], r.mode) for r in results if not r.ok and r.mode not in by_name[r.case].known_miss]
    if again:
        print(f"bench/casebook.py: {len(again)} run(s) again before they are recorded: "
              + ", ".join(f"{c.name} ({m})" for c, m in again), file=sys.stderr, flush=True)
        redone = {(r.case, r.mode): r for r in run_jobs(again, parallel=args.parallel, duration_s=args.duration,
                                                       progress=show, record=record)}
        results = [redone.get((r.case, r.mode), r) for r in results]
    _write_index(record, results, args)
    return results


def _phases(cases: list[Case], modes: tuple[str, ...]) -> tuple[list[tuple[Case, tuple[str, ...]]],
                                                                 list[tuple[Case, tuple[str, ...]]]]:
    """(phase 1: programs that may share the GPU, slow starters first; phase 3: those that run alone)."""
    starts = [(c, ms) for c in cases if c is not REFERENCE_TRAINER for ms in starts_for(c, modes)]
    shared = sorted((s for s in starts if not s[0].gpu_alone), key=lambda s: -s[0].ready_timeout_s)
    return shared, [s for s in starts if s[0].gpu_alone]


def _estimate_s(start: tuple[Case, tuple[str, ...]], duration_s: float) -> float:
    """A start's wall time on an H200, roughly: ready, settle, each doctor window and its attach."""
    case, ms = start
    ready = EST_READY_S + (EST_COMPILE_S if case.ready_timeout_s > 120 else 0.0)
    return ready + case.settle_s + sum(duration_s + 1.5 + (EST_ATTACH_S if m == "attach" else 0.0) for m in ms)


def _say(t0: float, text: str) -> None:
    print(f"[{time.monotonic() - t0:5.0f} s] {text}", file=sys.stderr, flush=True)


def run_gpu(cases: list[Case], modes: tuple[str, ...], args: argparse.Namespace, show: Any,
            t0: float) -> list[Result]:
    """The GPU batch in three phases (the module's docstring); every answer kept under --record."""
    device = ("--device", "cpu") if args.dry_run else ("--device", "cuda")
    timeout = None  # each case's own: a compiling program needs minutes on a busy CPU
    record = _recording(args)
    shared, alone = _phases(cases, modes)
    reference = REFERENCE_TRAINER if REFERENCE_TRAINER in cases else None
    ref_starts = starts_for(reference, modes) if reference is not None else []
    ref_modes = next((ms for ms in ref_starts if ms != ("probes",)), None)
    est = (sum(_estimate_s(s, args.duration) for s in shared) / max(1, args.parallel)
           + sum(_estimate_s(s, args.duration) for s in alone)
           + sum(_estimate_s((REFERENCE_TRAINER, ms), args.duration) - EST_READY_S for ms in ref_starts))
    _say(t0, f"GPU batch: {len(shared)} programs {args.parallel} at a time"
             f"{' (+ the reference trainer warming up)' if ref_modes else ''}, then "
             f"{'the reference trainer, then ' if ref_starts else ''}{len(alone)} alone; "
             f"modes {','.join(modes)}; about {est / 60:.1f} min on an H200"
             f"{'' if record is None else f'; recording to {record.directory}'}")
    ref_run = ref_thread = None
    ref_error: list[Exception] = []
    if ref_modes:
        ref_args = ("--preset", "tiny") if args.dry_run else ()
        ref_run = ProgramRun(REFERENCE_TRAINER, "plain", extra_args=ref_args, ready_timeout_s=timeout)
        ref_thread = threading.Thread(target=_wait_quietly, args=(ref_run, ref_error), name="reference-warm-up",
                                      daemon=True)
        ref_thread.start()
    results: list[Result] = []
    try:
        _say(t0, f"phase 1/3: {len(shared)} programs, {args.parallel} at a time")
        results += run_starts(shared, parallel=args.parallel, duration_s=args.duration, progress=show,
                              extra_args=device, ready_timeout_s=timeout, record=record)
        if ref_run is not None and ref_thread is not None and ref_modes is not None:
            _say(t0, "phase 2/3: the reference trainer, alone")
            ref_thread.join()
            ref_results = _diagnose_reference(ref_run, ref_modes, ref_error, args.duration, record)
            for r in ref_results:
                show(r)
            results += ref_results
            ref_run.stop(clean=not any(r.error for r in ref_results))
            ref_run = None
        if reference is not None and ("probes",) in ref_starts:
            results += run_starts([(reference, ("probes",))], parallel=1, duration_s=args.duration, progress=show,
                                  extra_args=("--preset", "tiny") if args.dry_run else (), ready_timeout_s=timeout,
                                  record=record)
        _say(t0, f"phase 3/3: {len(alone)} programs that read GPU utilisation, one at a time")
        results += run_starts(alone, parallel=1, duration_s=args.duration, progress=show, extra_args=device,
                              ready_timeout_s=timeout, record=record)
    finally:
        if ref_run is not None:
            ref_run.stop()
    if record is not None:
        _write_index(record, results, args)
    return results


def _wait_quietly(started: ProgramRun, errors: list[Exception]) -> None:
    try:
        started.wait_ready()
    except Exception as exc:  # reported as the reference's result when its turn comes
        errors.append(exc)


def _diagnose_reference(started: ProgramRun, modes: tuple[str, ...], errors: list[Exception],
                        duration_s: float, record: Recording | None) -> list[Result]:
    if errors:
        return started.failed(modes, errors[0])
    return started.diagnose(modes, duration_s=duration_s, record=record)


def _recording(args: argparse.Namespace) -> Recording | None:
    """--record DIR: a private directory for the answers; observations too where this doctor can save them."""
    if args.record is None:
        return None
    args.record.mkdir(mode=0o700, parents=True, exist_ok=True)
    can = doctor_can_save_observations()
    if not can:
        if not args.dry_run:
            raise SystemExit("bench/casebook.py: this checkout's `dflash-diag doctor` has no --save-observation, so "
                             "--record would keep reports without the observations CI replays; update the checkout "
                             "(or use --dry-run to exercise the plumbing)")
        print("bench/casebook.py: doctor has no --save-observation here: --dry-run keeps the reports only",
              file=sys.stderr)
    return Recording(args.record, observations=can, fixtures=not args.gpu)


def _write_index(record: Recording, results: list[Result], args: argparse.Namespace) -> None:
    """DIR/recorded.json: what each file is, what the case expects and what doctor said when it was recorded."""
    causes = {c.name: c for c in (*CASES, REFERENCE_TRAINER)}
    entries = []
    for r in results:
        obs = record.fixture(r.case, r.mode) if record.fixtures else record.observation(r.case, r.mode)
        rep = record.report(r.case, r.mode)
        entries.append({"case": r.case, "mode": r.mode, "healthy": r.healthy_case,
                        "known_miss": causes[r.case].known_miss.get(r.mode, ""),
                        "observation": obs.name if obs.exists() else None,
                        "report": rep.name if rep.exists() else None,
                        "expected": list(r.expected), "headline": r.headline_rule,
                        "because": list(r.headline_because), "warnings": list(r.warnings), "ok": r.ok,
                        "error": r.error})
    path = record.directory / "recorded.json"
    entries = _merged_entries(path, entries)
    doc = {"schema": "casebook-recording/1", "command": " ".join([Path(sys.executable).name, *sys.argv]),
           "date_utc": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M"), "machine": _machine(),
           "dry_run": bool(args.dry_run), "entries": entries}
    fd = os.open(path.with_name(".recorded.json.tmp"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(doc, indent=1) + "\n")
    os.replace(path.with_name(".recorded.json.tmp"), path)


def _merged_entries(path: Path, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """This run's entries, and an earlier index's for the (case, mode) runs this one did not make (``--cases``
    records a few again into the same directory)."""
    try:
        earlier = json.loads(path.read_text()).get("entries", [])
    except (OSError, ValueError, AttributeError):
        earlier = []
    done = {(e["case"], e["mode"]) for e in entries}
    kept = [e for e in earlier if isinstance(e, dict) and (e.get("case"), e.get("mode")) not in done]
    return sorted(kept + entries, key=lambda e: (str(e.get("case")), str(e.get("mode"))))


def table(results: list[Result]) -> str:
    rows = ["| program | mode | planted cause | expected rules | named | headline | headline right | warnings "
            "| seconds to answer | program's rate then |", "|---|---|---|---|---|---|---|---|---|---|"]
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
                    f"{warnings} | {r.seconds_to_answer:.1f} | "
                    f"{f'{r.program_rate:g}/s' if r.program_rate is not None else '-'} |")
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
    parser.add_argument("--modes", default=None, help="comma list of outside, probes, attach (default all three; "
                        "with --gpu: outside,attach, on one start; each case runs in the modes it lists)")
    parser.add_argument("--family", help="only the cases of this family (and its healthy ones): e.g. health")
    parser.add_argument("--attach-method", help="attach mode's method: auto (default), ptrace, gdb, cuda-gdb, lldb, "
                        "remote-exec")
    parser.add_argument("--parallel", type=int, default=None, help="programs at a time (default 2 on CPU, 4 --gpu)")
    parser.add_argument("--duration", type=float, default=5.0, help="doctor --duration (default 5 s, its default)")
    parser.add_argument("--out", type=Path, help="write casebook.json and casebook.md here")
    parser.add_argument("--record", type=Path, metavar="DIR", help="keep the observation each answer was made from "
                        "(doctor --save-observation) in DIR, for CI's replay: on the CPU as gzip'd, redacted "
                        "fixtures (tests/casebook/observations), with --gpu beside each answer")
    parser.add_argument("--split", choices=("all", "tuning", "held-out"), default="all",
                        help="which cases: the held-out ones are written last and scored once, without tuning on "
                        "them (default all; tune with --split tuning)")
    args = parser.parse_args()
    if args.parallel is None:
        args.parallel = 4 if args.gpu and not args.dry_run else 2
    if args.modes is None:
        args.modes = ",".join(GPU_MODES if args.gpu else MODES)
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
