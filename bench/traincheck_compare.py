"""The health probe beside TrainCheck (OSDI '25) on the casebook's training-health programs: what each catches, how
soon after the bug starts, and what it costs the program (steps/s), on this machine, in one command.

For every program (tests/casebook/programs, family ``health``):

- **plain**: the program alone, its own step counter read from its output (steps/s).
- **dflash-diag**: under ``dflash-diag run --probes health`` and under ``dflash-diag run`` (every default probe):
  steps/s, and, polling the board, the first health verdict (``dflash_contract.health.judge``, the logic of
  doctor's findings): seconds after the first optimizer step (after the loss went non-finite, for the case whose
  bug starts mid-run) and the optimizer step it came at.
- **TrainCheck**, used as its authors describe: ``traincheck-collect`` on a known-good run, ``traincheck-infer`` its
  invariants, ``traincheck-collect -i`` the run to check, ``traincheck-check``. The known-good run of a buggy
  program is its healthy twin (the same program with the bug fixed: a small patch below); a second good run of the
  twin is checked too, and what it violates is TrainCheck's noise on that program. A bug is **caught** when the
  buggy run violates an invariant that the second good run does not; a healthy program's violations are false
  alarms. Detection: the first step of such a violation (the offline checker reports it after the run; the step
  is when an online checker could have), and the run's instrumented steps/s.

Everything is bounded: each run lasts ``--seconds`` (killed after), each TrainCheck stage has a timeout, and the
whole stops starting programs once ``--time-budget-s`` is spent (the rest reported as not run). Results are written
after every program (JSON and markdown) to ``--out``.

  .venv/bin/python bench/traincheck_compare.py --out /tmp/tc            # every health program (~1.5 h on 2 cores)
  .venv/bin/python bench/traincheck_compare.py --cases all_masked_loss,healthy_grad_accum --seconds 30
  .venv/bin/python bench/traincheck_compare.py --skip-traincheck        # the dflash-diag side only (minutes)

TrainCheck is not a dependency of this project: ``pip install traincheck`` into the same environment
(``traincheck-collect`` etc. next to this interpreter, or on PATH). Without it the TrainCheck columns say so.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "casebook"))
sys.path.insert(0, str(ROOT))

from cases import CASES, Case  # noqa: E402

from dflash_contract.health import judge  # noqa: E402

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_RUN_PID = re.compile(r"dflash-diag run: PID (\d+) under probes")


@dataclass(frozen=True)
class Spec:
    """What the comparison needs to know of one program beyond its casebook case."""

    step: str  # regex: the program's own step counter in its output (group 1)
    model: str  # the model's variable name in the main script (TrainCheck's --models-to-track)
    twin: tuple[tuple[str, str, str], ...] = ()  # (file, old, new): the bug fixed; () for a healthy program
    bug_step: int = 0  # the optimizer step the bug starts at (the first, but for a bug that starts mid-run)


SPECS: dict[str, Spec] = {
    "resume_rebuilt_model": Spec(
        r"\[finetune\] step (\d+) ", "model",
        (("finetune_sentiment.py", "    optimizer, scheduler = build_training_objects(model, args.lr)\n", ""),
         ("finetune_sentiment.py", "    model = load_pretrained(SentimentNet, ckpt)\n",
          "    model = load_pretrained(SentimentNet, ckpt)\n"
          "    optimizer, scheduler = build_training_objects(model, args.lr)\n"))),
    "weight_norm_late": Spec(r"iter=(\d+) ", "net",
                             (("train_regressor.py", 'if "--no-weight-norm" not in sys.argv:', "if False:"),)),
    "nograd_encoder_helper": Spec(r"pretrain step (\d+) ", "model",
                                  (("embedlib/encode.py", "@torch.no_grad()\n", ""),)),
    "lora_after_optimizer": Spec(
        r"step +(\d+) +loss", "model",
        (("tune.py", '    optimizer = torch.optim.AdamW(model.parameters(), lr=CFG["lr"], weight_decay=CFG["wd"])\n', ""),
         ("tune.py", '    model = inject_lora(model, r=CFG["lora_r"])\n',
          '    model = inject_lora(model, r=CFG["lora_r"])\n'
          '    optimizer = torch.optim.AdamW(model.parameters(), lr=CFG["lr"], weight_decay=CFG["wd"])\n'))),
    "rezero_buffer_gate": Spec(r"it (\d+): ", "model",
                               (("blocks.py", 'self.register_buffer("alpha", torch.zeros(1))',
                                 "self.alpha = nn.Parameter(torch.zeros(1))"),)),
    "all_masked_loss": Spec(r"update (\d+) \|", "lm", (("sft_answers.py", "ANSWER_SEGMENT = 2 ", "ANSWER_SEGMENT = 1 "),)),
    "nan_loss_full_speed": Spec(r"step=(\d+) ", "model",
                                (("forecast.py", "torch.log(hist)", "torch.log1p(hist)"),
                                 ("forecast.py", "torch.log(target)", "torch.log1p(target)")),
                                bug_step=40),  # the shard with zeros starts at step 40: its first batch a few later
    "fp16_scaler_nan": Spec(r"it=(\d+) ", "model",
                            (("regress_fp16.py", "return (x - x.mean(0)) / x.std(0)",
                              "return (x - x.mean(0)) / x.std(0).clamp(min=1e-3)"),)),
    "lr_floor_scheduler": Spec(r"step (\d+) loss", "model",
                               (("pretrain_mlm.py", "total_steps=args.epochs)", "total_steps=args.epochs * 100_000)"),)),
    "reentrant_segments": Spec(r"Train batch (\d+)\b", "net",
                               (("vision_train.py", "use_reentrant=True", "use_reentrant=False"),)),
    "healthy_frozen_teacher": Spec(r"distill step (\d+) ", "student"),
    "healthy_grad_accum": Spec(r"optimizer step (\d+) ", "model"),
    "healthy_clip_warmup": Spec(r"step +(\d+) loss", "scorer"),
    "healthy_amp_overflow": Spec(r"it (\d+) loss", "net"),
    "healthy_alternating_heads": Spec(r"step (\d+) ", "trunk"),
}


@dataclass
class Run:
    """One program run: its output lines with the time each was read, and how it ended."""

    lines: list[tuple[float, str]] = field(default_factory=list)
    started: float = 0.0
    returncode: int | None = None

    def text(self) -> str:
        return "\n".join(line for _, line in self.lines)


def _reader(stream: Any, run: Run) -> None:
    for raw in iter(stream.readline, b""):
        run.lines.append((time.monotonic(), _ANSI.sub("", raw.decode(errors="replace").rstrip("\n"))))


def run_for(argv: list[str], cwd: Path, seconds: float, env: dict[str, str],
            on_tick: Any = None) -> Run:
    """Run ``argv`` for ``seconds`` (then SIGTERM to its group, SIGKILL 30 s later); ``on_tick(run, proc)`` is called
    every 0.1 s meanwhile and may return True to stop early."""
    run = Run(started=time.monotonic())
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    reader = threading.Thread(target=_reader, args=(proc.stdout, run), daemon=True)
    reader.start()
    try:
        while time.monotonic() - run.started < seconds and proc.poll() is None:
            if on_tick is not None and on_tick(run, proc):
                break
            time.sleep(0.1)
    finally:
        _stop(proc)
        reader.join(timeout=10)
        run.returncode = proc.returncode
    return run


def _stop(proc: subprocess.Popen[bytes]) -> None:
    for sig, wait_s in ((signal.SIGTERM, 30.0), (signal.SIGKILL, 10.0)):
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            continue


def steps_per_s(run: Run, step_re: str, skip_first: int = 1) -> float | None:
    """The program's own step counter over its log lines (the first ``skip_first`` lines are warm-up)."""
    pattern = re.compile(step_re)
    points = [(t, int(m.group(1))) for t, line in run.lines if (m := pattern.search(line))]
    points = points[skip_first:]
    if len(points) < 2 or points[-1][0] <= points[0][0]:
        return None
    return (points[-1][1] - points[0][1]) / (points[-1][0] - points[0][0])


def _copy_program(case: Case, into: Path, patches: tuple[tuple[str, str, str], ...] = ()) -> Path:
    target = into / case.program
    shutil.copytree(ROOT / "tests" / "casebook" / "programs" / case.program, target)
    for rel, old, new in patches:
        path = target / rel
        text = path.read_text()
        if old not in text:
            raise SystemExit(f"bench/traincheck_compare.py: the {case.name} twin patch does not apply to {rel}: "
                             f"{old.strip()!r} not found")
        path.write_text(text.replace(old, new, 1))
    return target


def _private_dir(parent: Path, name: str) -> Path:
    path = parent / name
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


# --- dflash-diag ---------------------------------------------------------------------------------------------


def measure_plain(case: Case, spec: Spec, work: Path, seconds: float) -> dict[str, Any]:
    program = _copy_program(case, _private_dir(work, "plain"))
    run = run_for([sys.executable, *case.argv], program, seconds, _env(work))
    return {"steps_per_s": _round(steps_per_s(run, spec.step))}


def measure_dflash_diag(case: Case, spec: Spec, work: Path, seconds: float, probes: str) -> dict[str, Any]:
    """Steps/s under `dflash-diag run --probes <probes>` and the first health verdict on its board."""
    where = _private_dir(work, f"dflash-{probes}")
    boards = _private_dir(where, "boards")
    program = _copy_program(case, where)
    found: dict[str, Any] = {}
    state: dict[str, Any] = {"first_step_wall_s": None}

    def tick(run: Run, proc: subprocess.Popen[bytes]) -> bool:
        match = _RUN_PID.search(run.text())
        if match is None or found:
            return False
        try:
            board = json.loads((boards / f"{match.group(1)}.json").read_text())
        except (OSError, ValueError):
            return False
        payload = (board.get("probes") or {}).get("health") or {}
        steps = payload.get("steps") or 0
        now = time.time()
        if steps and state["first_step_wall_s"] is None:
            state["first_step_wall_s"] = now
        verdicts = judge(payload, now)
        if verdicts:
            found.update(rules=sorted(v.rule_id for v in verdicts), at_wall_s=now, at_step=steps,
                         claim=verdicts[0].claim[:200])
        return False  # keep running: the steps/s needs the whole window

    argv = [sys.executable, "-m", "dflash_diag", "run", "--probes", probes, "--", sys.executable, *case.argv]
    run = run_for(argv, program, seconds, {**_env(work), "DFLASH_DIAG_BOARD_DIR": str(boards)}, tick)
    out: dict[str, Any] = {"steps_per_s": _round(steps_per_s(run, spec.step))}
    if found:
        # Seconds from the first optimizer step the board showed (it publishes twice a second); a bug that starts
        # mid-run adds its steps at the program's rate.
        rate = out["steps_per_s"]
        start = state["first_step_wall_s"]
        late_s = spec.bug_step / rate if spec.bug_step and rate else 0.0
        out.update(caught=found["rules"], at_step=found["at_step"], steps_after_bug=found["at_step"] - spec.bug_step,
                   claim=found["claim"],
                   seconds_after_bug=_round(max(0.0, found["at_wall_s"] - start - late_s)) if start else None)
    else:
        out.update(caught=[])
    return out


# --- TrainCheck ----------------------------------------------------------------------------------------------


def traincheck_bin(name: str) -> str | None:
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else shutil.which(name)


def _tc_collect(case: Case, spec: Spec, program: Path, out: Path, seconds: float, work: Path,
                invariants: Path | None = None) -> tuple[Run, float | None]:
    collect = traincheck_bin("traincheck-collect")
    assert collect is not None
    argv = [collect, "-p", case.argv[0], "--models-to-track", spec.model, "--output-dir", str(out)]
    if invariants is not None:
        argv += ["-i", str(invariants)]
    run = run_for(argv, program, seconds, _env(work))
    trim_last_step(out)
    return run, trace_steps_per_s(out) or steps_per_s(run, spec.step)


def trim_last_step(trace_dir: Path) -> None:
    """Drop the records of the last step from an API trace: the run was stopped in the middle of it, and a call
    without its return makes traincheck-infer fail ("Exceptions or incomplete function calls don't have return
    values"). Every earlier step is complete."""
    for path in trace_dir.glob("trace_API_*.log"):
        lines = path.read_text(errors="replace").splitlines()
        steps = []
        for line in lines:
            try:
                steps.append((json.loads(line).get("meta_vars") or {}).get("step"))
            except ValueError:
                steps.append(None)
        last = max((s for s in steps if isinstance(s, int)), default=None)
        if last is None or last == 0:
            continue
        kept = [line for line, s in zip(lines, steps, strict=True) if isinstance(s, int) and s < last]
        path.write_text("\n".join(kept) + "\n")


def crashed(trace_dir: Path) -> str | None:
    """The error an instrumented program died of (TrainCheck writes its output and exit code), else None."""
    try:
        text = (trace_dir / "program_output.txt").read_text(errors="replace")
    except OSError:
        return None
    exit_code = re.search(r"Program exited with code (-?\d+)", text)
    if exit_code is None or exit_code.group(1) == "0":
        return None
    errors = [line.strip() for line in text.splitlines() if re.match(r"\s*\w+(Error|Exception)\b", line)]
    return (errors[-1] if errors else f"exit code {exit_code.group(1)}")[:240]


def trace_steps_per_s(trace_dir: Path) -> float | None:
    """Steps/s of an instrumented run from its own trace: TrainCheck stamps every record with the step and a clock
    (ns); from the first training step to the last record (a slow run prints too few log lines to read it)."""
    points: list[tuple[int, int]] = []
    for path in trace_dir.glob("trace_API_*.log"):
        with path.open() as f:
            for line in f:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                step, at = (record.get("meta_vars") or {}).get("step"), record.get("time")
                if isinstance(step, int) and step >= 1 and isinstance(at, int):
                    points.append((at, step))
    if len(points) < 2:
        return None
    first, last = min(points), max(points)
    span_s = (last[0] - first[0]) / 1e9
    return (last[1] - first[1]) / span_s if span_s > 0 else None


def _tc_stage(argv: list[str], timeout_s: float, log: Path) -> tuple[bool, float]:
    t0 = time.monotonic()
    with log.open("wb") as f:
        try:
            # its stages write their own logs (tens of MB) into the working directory: the stage's, not ours
            done = subprocess.run(argv, stdout=f, stderr=subprocess.STDOUT, timeout=timeout_s,
                                  stdin=subprocess.DEVNULL, cwd=log.parent)
            ok = done.returncode == 0
        except subprocess.TimeoutExpired:
            ok = False
    return ok, time.monotonic() - t0


def _last_error(log: Path) -> str:
    """The last exception line of a TrainCheck log (its progress bars are carriage-return lines)."""
    try:
        lines = log.read_text(errors="replace").replace("\r", "\n").splitlines()
    except OSError:
        return "no log"
    errors = [line.strip() for line in lines if re.match(r"\s*\w+(Error|Exception)\b", line)]
    return errors[-1][:200] if errors else (lines[-1][:200] if lines else "empty log")


def _violations(check_dir: Path) -> list[dict[str, Any]]:
    summaries = list(check_dir.rglob("violations_summary.json"))
    if not summaries:
        return []
    doc = json.loads(summaries[0].read_text())
    return [v for v in doc.get("violations", []) if isinstance(v, dict)]


def measure_traincheck(case: Case, spec: Spec, work: Path, seconds: float, stage_timeout_s: float) -> dict[str, Any]:
    """Reference (good) run -> invariants -> the run to check (-i) -> offline check; for a buggy program also a
    second good run, checked the same way: its violations are TrainCheck's noise on that program."""
    infer, check = traincheck_bin("traincheck-infer"), traincheck_bin("traincheck-check")
    base = _private_dir(work, "traincheck")
    good = _copy_program(case, _private_dir(base, "good"), spec.twin)
    out: dict[str, Any] = {}
    ref_run, ref_rate = _tc_collect(case, spec, good, base / "ref", seconds, work)
    out["reference_steps_per_s"] = _round(ref_rate)
    if (died := crashed(base / "ref")) is not None:
        out["error"] = f"the instrumented good run crashed: {died}"
        return out
    invariants = base / "invariants.json"
    ok, infer_s = _tc_stage([str(infer), "-f", str(base / "ref"), "-o", str(invariants), "-j", "2"],
                            stage_timeout_s, base / "infer.log")
    out["infer_s"] = round(infer_s, 1)
    if not ok or not invariants.exists():
        out["error"] = (f"traincheck-infer failed ({_last_error(base / 'infer.log')})" if infer_s < stage_timeout_s
                        else f"traincheck-infer ran past {stage_timeout_s:.0f} s")
        return out
    out["invariants"] = sum(1 for _ in invariants.open())
    targets = [("checked", _copy_program(case, _private_dir(base, "target"), ()))]
    if spec.twin:  # a buggy program: its second good run gives the noise
        targets.append(("noise", good))
    per: dict[str, dict[str, Any]] = {}
    for label, program in targets:
        trace = base / f"trace-{label}"
        run, rate = _tc_collect(case, spec, program, trace, seconds, work, invariants)
        ok, check_s = _tc_stage([str(check), "-f", str(trace), "-i", str(invariants), "-o", str(base / f"check-{label}")],
                                stage_timeout_s, base / f"check-{label}.log")
        per[label] = {"steps_per_s": _round(rate), "check_s": round(check_s, 1), "ok": ok,
                      "violations": _violations(base / f"check-{label}"), "crashed": crashed(trace)}
    checked = per["checked"]
    out.update(steps_per_s=checked["steps_per_s"], check_s=checked["check_s"])
    if checked["crashed"]:  # its violations say the program died, not what it did wrong
        out["error"] = f"the instrumented run crashed: {checked['crashed']}"
        return out
    if not checked["ok"]:
        out["error"] = f"traincheck-check failed or ran past {stage_timeout_s:.0f} s"
        return out
    violated = checked["violations"]
    if spec.twin:
        noise = {v.get("display_name") for v in per["noise"]["violations"]}
        new = [v for v in violated if v.get("display_name") not in noise]
        out.update(violations=len(violated), noise=len(noise), caught=bool(new),
                   first_step=min((int(v.get("first_step") or 0) for v in new), default=None),
                   steps_after_bug=min((int(v.get("first_step") or 0) - spec.bug_step for v in new), default=None),
                   examples=[str(v.get("display_name")) for v in new[:3]])
    else:
        out.update(violations=len(violated), false_alarm=bool(violated),
                   examples=[str(v.get("display_name")) for v in violated[:3]])
    return out


# --- the whole comparison -----------------------------------------------------------------------------------


def _env(work: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DFLASH_DIAG_")}
    env.update(PYTHONUNBUFFERED="1", WANDB_MODE="disabled", PYTHONDONTWRITEBYTECODE="1",
               DFLASH_DIAG_BOARD_DIR=str(_private_dir(work, "boards")), TMPDIR=str(_private_dir(work, "tmp")))
    return env


def _round(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits)


def compare(case: Case, spec: Spec, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    row: dict[str, Any] = {"case": case.name, "healthy": case.healthy, "cause": case.cause}
    row["plain"] = measure_plain(case, spec, work, args.rate_seconds)
    row["health"] = measure_dflash_diag(case, spec, work, args.rate_seconds, "health")
    row["all_probes"] = measure_dflash_diag(case, spec, work, args.rate_seconds, "all")
    if args.skip_traincheck:
        row["traincheck"] = {"error": "skipped (--skip-traincheck)"}
    elif traincheck_bin("traincheck-collect") is None:
        row["traincheck"] = {"error": "TrainCheck is not installed (pip install traincheck)"}
    else:
        row["traincheck"] = measure_traincheck(case, spec, work, args.seconds, args.stage_timeout_s)
    return row


def _fmt_rate(block: dict[str, Any], plain: float | None) -> str:
    rate = block.get("steps_per_s")
    if rate is None:
        return "-"
    return f"{rate:g}" + (f" ({rate / plain:.2f}x)" if plain else "")


def _ours(block: dict[str, Any], healthy: bool) -> str:
    caught = block.get("caught") or []
    if healthy:
        return "no finding" if not caught else f"**false alarm**: {', '.join(caught)}"
    if not caught:
        return "missed"
    after = block.get("seconds_after_bug")
    when = f"{after:g} s, " if after is not None else ""
    return f"{', '.join(f'`{c}`' for c in caught)}: {when}{block.get('steps_after_bug')} steps after the bug"


def _theirs(block: dict[str, Any], healthy: bool) -> str:
    if block.get("error"):
        return f"not run: {block['error']}"
    if healthy:
        n = block.get("violations", 0)
        return "no violation" if not n else f"**{n} violations** (e.g. {'; '.join(block.get('examples', [])[:1])})"
    if not block.get("caught"):
        return f"missed ({block.get('violations', 0)} violations, all also on a good run)"
    return (f"caught {block.get('steps_after_bug')} steps after the bug ({block.get('violations')} violations, "
            f"{block.get('noise')} also on a good run; e.g. {'; '.join(block.get('examples', [])[:1])})")


def markdown(doc: dict[str, Any]) -> str:
    rows = ["| program | planted | dflash-diag (health probe) | TrainCheck | steps/s plain | `run --probes health` "
            "| `run` (all probes) | TrainCheck collect `-i` | TrainCheck infer + check |",
            "|---|---|---|---|---|---|---|---|---|"]
    for row in doc["results"]:
        plain = (row.get("plain") or {}).get("steps_per_s")
        tc = row.get("traincheck") or {}
        rows.append(
            f"| {row['case']} | {'none (healthy)' if row['healthy'] else row['cause'][:90]} "
            f"| {_ours(row.get('health') or {}, row['healthy'])} | {_theirs(tc, row['healthy'])} "
            f"| {plain if plain is not None else '-'} | {_fmt_rate(row.get('health') or {}, plain)} "
            f"| {_fmt_rate(row.get('all_probes') or {}, plain)} | {_fmt_rate(tc, plain)} "
            f"| {tc.get('infer_s', '-')} s + {tc.get('check_s', '-')} s |")
    skipped = doc.get("not_run") or []
    tail = f"\n\nNot run (time budget): {', '.join(skipped)}" if skipped else ""
    return (f"`{doc['command']}`, {doc['date_utc']} UTC, {doc['machine']}, {doc['elapsed_s']:.0f} s\n\n"
            + "\n".join(rows) + tail + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", help="comma list (default: every health program with a spec)")
    parser.add_argument("--seconds", type=float, default=45.0, help="each TrainCheck-instrumented run (default 45)")
    parser.add_argument("--rate-seconds", type=float, default=20.0,
                        help="each plain / dflash-diag run (default 20)")
    parser.add_argument("--stage-timeout-s", type=float, default=900.0,
                        help="traincheck-infer / traincheck-check each (default 900)")
    parser.add_argument("--time-budget-s", type=float, default=7200.0,
                        help="no program starts after this much (default 7200)")
    parser.add_argument("--skip-traincheck", action="store_true", help="the dflash-diag side only")
    parser.add_argument("--out", type=Path, help="write traincheck_compare.json and .md here")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (traces, logs)")
    args = parser.parse_args()
    names = args.cases.split(",") if args.cases else list(SPECS)
    unknown = [n for n in names if n not in SPECS]
    if unknown:
        parser.error(f"unknown case(s): {', '.join(unknown)} (known: {', '.join(SPECS)})")
    by_name = {c.name: c for c in CASES}
    work = Path(tempfile.mkdtemp(prefix="traincheck-compare-"))
    os.chmod(work, 0o700)
    started = dt.datetime.now(dt.UTC)
    t0 = time.monotonic()
    doc: dict[str, Any] = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]), "date_utc": started.strftime("%Y-%m-%d %H:%M"),
        "machine": f"{platform.node()}: {os.cpu_count()} CPUs, Python {platform.python_version()}, "
                   f"torch {_version('torch')}, traincheck {_version('traincheck')}",
        "results": [], "not_run": [], "elapsed_s": 0.0}
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
    try:
        for name in names:
            if time.monotonic() - t0 > args.time_budget_s:
                doc["not_run"].append(name)
                continue
            print(f"[{time.monotonic() - t0:6.0f} s] {name}", file=sys.stderr, flush=True)
            doc["results"].append(compare(by_name[name], SPECS[name], _private_dir(work, name), args))
            doc["elapsed_s"] = round(time.monotonic() - t0, 1)
            _write(doc, args.out)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    doc["elapsed_s"] = round(time.monotonic() - t0, 1)
    _write(doc, args.out)
    print(markdown(doc))
    return 0


def _version(module: str) -> str:
    try:
        from importlib.metadata import version

        return version(module)
    except Exception:
        return "not installed"


def _write(doc: dict[str, Any], out: Path | None) -> None:
    if out is None:
        return
    (out / "traincheck_compare.json").write_text(json.dumps(doc, indent=1))
    (out / "traincheck_compare.md").write_text(markdown(doc))


if __name__ == "__main__":
    raise SystemExit(main())
