"""What ``dflash-diag top`` costs the trainer it watches, and what it costs itself.

One reference-trainer process runs throughout; phases with ``top --batch`` attached and phases without alternate
(ABBA order per pair of rounds, so slow drift cancels). Per phase the trainer's own per-step tok/s (its log lines,
``--log-interval 1``) is summarised by the median; the overhead is the median over rounds of on/off. ``top``'s CPU
is read from /proc/<top pid>/stat (utime+stime plus its reaped children, i.e. the py-spy dumps) between two points
while it samples, so interpreter start-up is excluded; the whole-process figure is reported too.

  .venv/bin/python bench/attach_overhead.py --preset tiny --rounds 4 --phase-s 20
  python bench/attach_overhead.py --preset qwen3.5-4b --rounds 6 --json out.json      # on the GPU box

Prints a table and a JSON document (stdout, or --json PATH).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
STEP_LINE = re.compile(r"^step\s+(\d+)\s+\|\s+tok/s\s+([\d,\.]+)")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class StepLog:
    """The trainer's step lines as they arrive: (monotonic time, step, tok/s of that step)."""

    points: list[tuple[float, int, float]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def follow(self, stream: Any) -> None:
        for line in stream:
            match = STEP_LINE.match(line)
            if match:
                with self.lock:
                    self.points.append((time.monotonic(), int(match[1]), float(match[2].replace(",", ""))))

    def between(self, start_s: float, end_s: float) -> list[float]:
        with self.lock:
            return [tok_s for t, _, tok_s in self.points if start_s <= t <= end_s]

    def steps(self) -> int:
        with self.lock:
            return self.points[-1][1] if self.points else 0


@dataclass
class Phase:
    round: int
    attached: bool
    tok_s_median: float
    steps: int
    top_cpu_pct_steady: float | None = None  # % of one core while sampling, from /proc
    top_cpu_pct_total: float | None = (
        None  # whole top process incl. start-up, from getrusage(RUSAGE_CHILDREN)
    )
    top_samples: int | None = None


def _proc_cpu_s(pid: int) -> float | None:
    """utime + stime + cutime + cstime of a live process, seconds (children: the py-spy dumps it reaped)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return sum(int(v) for v in fields[11:15]) / CLOCK_TICKS


def _start_trainer(args: argparse.Namespace, workdir: Path) -> tuple[subprocess.Popen[str], StepLog]:
    total_s = args.warmup_s + args.rounds * 2 * (args.phase_s + args.settle_s) + 120
    cmd = [
        sys.executable, "-m", "reference_trainer", "--preset", args.preset, "--log-interval", str(args.log_interval),
        "--wandb", "off", "--max-seconds", str(total_s), "--checkpoint-dir", str(workdir / "ckpt"),
        *args.trainer_args,
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    log = StepLog()
    assert proc.stdout is not None
    threading.Thread(target=log.follow, args=(proc.stdout,), daemon=True).start()
    return proc, log


def _wait_first_steps(proc: subprocess.Popen[str], log: StepLog, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while log.steps() < 2:
        if proc.poll() is not None:
            sys.exit(f"attach_overhead: the trainer exited with {proc.returncode} before training")
        if time.monotonic() > deadline:
            sys.exit("attach_overhead: no step line from the trainer in time")
        time.sleep(0.5)


def _run_top(
    args: argparse.Namespace, pid: int, phase_s: float
) -> tuple[float | None, float | None, int | None]:
    """``top --batch`` for ``phase_s``: (steady CPU %, total CPU %, samples)."""
    cmd = [
        sys.executable, "-m", "dflash_diag", "top", "--pid", str(pid), "--batch", "--json",
        "--duration", str(phase_s), *(["--rate", str(args.rate)] if args.rate else []),
    ]  # fmt: skip
    t0 = time.monotonic()
    before = resource.getrusage(
        resource.RUSAGE_CHILDREN
    )  # the trainer is not reaped until the end: not in it
    top = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    # Read /proc twice while it samples: after start-up (imports, attach check) and shortly before the end.
    startup_s = min(args.startup_s, phase_s / 3)
    time.sleep(startup_s)
    a_t, a_cpu = time.monotonic(), _proc_cpu_s(top.pid)
    time.sleep(max(0.5, phase_s - 1.0))
    b_t, b_cpu = time.monotonic(), _proc_cpu_s(top.pid)
    out, err = top.communicate(timeout=phase_s + 120)
    wall_s = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # + top and the py-spy runs it reaped
    if top.returncode != 0:
        print(f"attach_overhead: top failed ({top.returncode}): {err.strip()}", file=sys.stderr)
        return None, None, None
    steady = None
    if a_cpu is not None and b_cpu is not None and b_t > a_t:
        steady = 100.0 * (b_cpu - a_cpu) / (b_t - a_t)
    total_cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    total = 100.0 * total_cpu_s / wall_s
    samples = json.loads(out).get("samples")
    return steady, total, samples


def _phase(
    args: argparse.Namespace, proc: subprocess.Popen[str], log: StepLog, rnd: int, attached: bool
) -> Phase:
    time.sleep(args.settle_s)  # let the previous phase's effect (or top's exit) settle before measuring
    start = time.monotonic()
    steady = total = samples = None
    if attached:
        steady, total, samples = _run_top(args, proc.pid, args.phase_s)
    else:
        time.sleep(args.phase_s)
    end = time.monotonic()
    values = log.between(start, end)
    median = statistics.median(values) if values else float("nan")
    return Phase(rnd, attached, median, len(values), steady, total, samples)


def _summary(phases: list[Phase]) -> dict[str, Any]:
    ratios = []
    for rnd in sorted({p.round for p in phases}):
        on = [p for p in phases if p.round == rnd and p.attached]
        off = [p for p in phases if p.round == rnd and not p.attached]
        if on and off and off[0].tok_s_median > 0:
            ratios.append(on[0].tok_s_median / off[0].tok_s_median)
    steady = [p.top_cpu_pct_steady for p in phases if p.top_cpu_pct_steady is not None]
    total = [p.top_cpu_pct_total for p in phases if p.top_cpu_pct_total is not None]
    return {
        "tok_s_ratio_median": statistics.median(ratios) if ratios else None,
        "tok_s_ratios": ratios,
        "overhead_pct_median": 100.0 * (1 - statistics.median(ratios)) if ratios else None,
        "top_cpu_pct_steady_median": statistics.median(steady) if steady else None,
        "top_cpu_pct_total_median": statistics.median(total) if total else None,
    }


def _table(phases: list[Phase], summary: dict[str, Any]) -> str:
    def f(value: float | None, fmt: str) -> str:
        return "-" if value is None else format(value, fmt)

    rows = [
        f"{'round':>5} {'top':>4} {'tok/s median':>13} {'steps':>6} {'top cpu% steady':>16} {'total':>7} {'samples':>8}"
    ]
    for p in phases:
        rows.append(
            f"{p.round:>5} {'on' if p.attached else 'off':>4} {p.tok_s_median:>13,.1f} {p.steps:>6}"
            f" {f(p.top_cpu_pct_steady, '.1f'):>16} {f(p.top_cpu_pct_total, '.1f'):>7} {f(p.top_samples, 'd'):>8}"
        )
    rows.append(
        f"median on/off tok/s ratio {f(summary['tok_s_ratio_median'], '.4f')}"
        f" (overhead {f(summary['overhead_pct_median'], '.2f')}%), top CPU steady"
        f" {f(summary['top_cpu_pct_steady_median'], '.1f')}% of a core"
        f" (whole process {f(summary['top_cpu_pct_total_median'], '.1f')}%)"
    )
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--phase-s", type=float, default=20.0, help="seconds per phase (on or off)")
    parser.add_argument("--settle-s", type=float, default=2.0, help="pause between phases, not measured")
    parser.add_argument("--warmup-s", type=float, default=15.0, help="training before the first phase")
    parser.add_argument(
        "--startup-s", type=float, default=4.0, help="top start-up excluded from the steady CPU"
    )
    parser.add_argument(
        "--log-interval",
        type=int,
        default=1,
        help="trainer steps per log line (each line reads the loss back: one host sync, equal in both phases)",
    )
    parser.add_argument("--rate", type=float, help="top's sampling rate (default: top's own default)")
    parser.add_argument("--json", help="write the JSON result here (default: stdout after the table)")
    parser.add_argument("trainer_args", nargs="*", help="extra reference_trainer arguments (after --)")
    args = parser.parse_args()
    if args.rounds < 1 or args.phase_s < 3:
        parser.error("need --rounds >= 1 and --phase-s >= 3")

    with tempfile.TemporaryDirectory(prefix="attach-overhead-") as workdir:
        proc, log = _start_trainer(args, Path(workdir))
        try:
            _wait_first_steps(proc, log, timeout_s=600)
            time.sleep(args.warmup_s)
            phases: list[Phase] = []
            for rnd in range(args.rounds):
                order = (False, True) if rnd % 2 == 0 else (True, False)  # ABBA
                for attached in order:
                    phase = _phase(args, proc, log, rnd, attached)
                    phases.append(phase)
                    print(
                        f"round {rnd} top {'on ' if attached else 'off'}: {phase.tok_s_median:,.1f} tok/s",
                        file=sys.stderr,
                        flush=True,
                    )
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
    summary = _summary(phases)
    result = {
        "bench": "attach_overhead",
        "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "machine": {"host": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version()},
        "args": {k: v for k, v in vars(args).items() if k != "json"},
        "phases": [asdict(p) for p in phases],
        "summary": summary,
    }
    print(_table(phases, summary))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    else:
        print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
