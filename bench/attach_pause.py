"""The pause of `dflash-diag attach` / `detach`, per method, side by side: how long a thread of the process could
not run its own code, and the hole the program itself sees.

For each method (``--methods``: ptrace, gdb, cuda-gdb, lldb, remote-exec; ``all``: every one that can run here,
the others listed with why not) and each target, ``--rounds`` attach + detach cycles (all probes, through the
library call the commands use), recording for each injection:

- ``paused_ms`` and ``threads_paused``: what the injector measured and the commands print (the longest stop of
  one thread, from its first stop to its resume; how many threads it stopped);
- the hole as the program sees it. ``heartbeat`` target: a program whose main thread and 3 worker threads tick
  every millisecond and log every gap over 3 ms (CLOCK_MONOTONIC, comparable across processes): the longest gap
  overlapping the injection, and how many threads saw one. ``trainer`` target: the reference trainer
  (``--probes none --log-interval 1``): the longest step overlapping the injection minus the median step before
  (its own ``step N ms``). Both include the bootstrap, which runs in the main thread with the GIL held (loading
  the probes, then starting them: ``ran_after_ms`` from the queued call to the answer, ``bootstrap_ms`` the start
  alone): the pause is the injector's share of the hole;
- the baseline: the same measures over as long a quiet window, so a loaded machine's noise is visible.

Writes ``attach_pause.json`` and ``attach_pause.md`` to ``--out``. Bounded: each injection has ``--timeout``,
the trainer its ``--max-s``, the whole run ``--budget-s`` (what is left is skipped and said). Exit 1 when an
injection that should work failed, or a ptrace pause reached 50 ms beyond what another load added (the helper and
the held thread runnable without a CPU during it, from their schedstat: ``runq_ms``).

  .venv/bin/python bench/attach_pause.py --dry-run --out /tmp/pause-dry                    # CPU, seconds (tested)
  .venv/bin/python bench/attach_pause.py --methods all --target both --rounds 5 --out /tmp/pause-cpu
  python bench/attach_pause.py --methods all --target both --preset qwen3.5-4b --rounds 3 --out /tmp/pause-h200
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

METHODS = ("ptrace", "gdb", "cuda-gdb", "lldb", "remote-exec")
PAUSE_GOAL_MS = 50.0
GAP_MS = 3.0
STEP_LINE = re.compile(r"^step\s+(\d+)\s+\|.*\|\s+step\s+([\d.]+)\s+ms")

HEARTBEAT = r"""
import json, os, sys, threading, time
out, gap_s = sys.argv[1], float(sys.argv[2])
gaps, lock = [], threading.Lock()
def tick(name):
    last = time.monotonic()
    while True:
        time.sleep(0.001)
        now = time.monotonic()
        if now - last > gap_s:
            with lock:
                gaps.append([last, now, name])
        last = now
def dump():
    while True:
        time.sleep(0.1)
        with lock:
            data = json.dumps(gaps[-5000:])
        with open(out + ".tmp", "w") as fh:
            fh.write(data)
        os.replace(out + ".tmp", out)
for i in range(3):
    threading.Thread(target=tick, args=(f"worker-{i}",), name=f"worker-{i}", daemon=True).start()
threading.Thread(target=dump, name="dump", daemon=True).start()
print("ready", os.getpid(), flush=True)
tick("MainThread")
"""


@dataclass
class Steps:
    """The trainer's per-step lines as they arrive: (monotonic arrival, step, step_ms)."""

    points: list[tuple[float, int, float]] = field(default_factory=list)
    tail: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def follow(self, stream: Any) -> None:
        for line in stream:
            with self.lock:
                self.tail = (self.tail + [line.rstrip()])[-20:]
                m = STEP_LINE.match(line)
                if m:
                    self.points.append((time.monotonic(), int(m[1]), float(m[2])))

    def between(self, t0: float, t1: float) -> list[float]:
        with self.lock:
            return [ms for t, _, ms in self.points if t0 <= t <= t1]


class Target:
    """A process to attach to, and what it sees of each injection."""

    def __init__(self, kind: str, args: argparse.Namespace, work: Path, env: dict[str, str]) -> None:
        self.kind, self.work = kind, work
        self.steps = Steps()
        self.gaps_path = work / f"{kind}-gaps.json"
        if kind == "heartbeat":
            script = work / "heartbeat.py"
            script.write_text(HEARTBEAT)
            cmd = [sys.executable, str(script), str(self.gaps_path), str(GAP_MS / 1e3)]
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env, cwd=work)
            assert self.proc.stdout is not None
            if not self.proc.stdout.readline().startswith("ready"):
                raise RuntimeError("the heartbeat program did not start")
        else:
            cmd = [sys.executable, "-m", "reference_trainer", "--preset", args.preset, "--probes", "none",
                   "--wandb", "off", "--log-interval", "1", "--max-seconds", str(args.max_s),
                   "--checkpoint-dir", str(work / "ckpt")]
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                         cwd=work)
            threading.Thread(target=self.steps.follow, args=(self.proc.stdout,), daemon=True).start()
            deadline = time.monotonic() + args.warmup_s + 600
            while len(self.steps.points) < 5 and self.proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.2)
            if self.proc.poll() is not None or len(self.steps.points) < 5:
                raise RuntimeError(f"the trainer did not reach steady steps: {self.steps.tail[-3:]}")
            time.sleep(args.warmup_s)
        self.pid = self.proc.pid

    def seen(self, t0: float, t1: float, baseline_ms: float | None = None) -> dict[str, Any]:
        """What the program saw of [t0, t1]: the longest gap (heartbeat) or step hole (trainer)."""
        if self.kind == "heartbeat":
            time.sleep(0.25)  # the program writes its gaps every 0.1 s
            try:
                gaps = json.loads(self.gaps_path.read_text())
            except (OSError, ValueError):
                gaps = []
            hit = [(b - a, name) for a, b, name in gaps if a < t1 and b > t0]
            return {"hole_ms": round(1e3 * max((d for d, _ in hit), default=0.0), 2),
                    "threads_with_gap": len({name for _, name in hit})}
        step_s = (baseline_ms or 100.0) / 1e3
        time.sleep(3 * step_s + 0.5)  # the step that held the pause has ended and logged
        during = self.steps.between(t0, t1 + 2 * step_s + 0.3)
        longest = max(during, default=None)
        hole = None if longest is None or baseline_ms is None else round(max(0.0, longest - baseline_ms), 2)
        return {"step_ms_max": longest, "hole_ms": hole}

    def baseline(self, seconds: float) -> dict[str, Any]:
        t0 = time.monotonic()
        time.sleep(seconds)
        t1 = time.monotonic()
        if self.kind == "heartbeat":
            return self.seen(t0, t1)
        steps = self.steps.between(t0, t1)
        return {"step_ms_median": statistics.median(steps) if steps else None, "steps": len(steps),
                "step_ms_max": max(steps, default=None)}

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def available(methods: list[str]) -> tuple[list[str], dict[str, str]]:
    """The methods that can run here, and why each other one cannot."""
    from dflash_diag.inject.method import find_debugger, ptrace_helper, ptrace_unsupported

    usable, why_not = [], {}
    for name in methods:
        if name == "ptrace":
            ok, reason = ptrace_helper() is not None, ptrace_unsupported()
        elif name == "remote-exec":
            ok, reason = sys.version_info >= (3, 14), "targets on Python 3.14+ only (this bench runs its own Python)"
        else:
            ok, reason = find_debugger(name) is not None, f"{name} is not installed"
        if ok:
            usable.append(name)
        else:
            why_not[name] = reason
    return usable, why_not


def inject_once(target: Target, action: str, method: str, board_dir: Path, timeout_s: float,
                baseline_ms: float | None) -> dict[str, Any]:
    from dflash_diag.errors import AttachError
    from dflash_diag.inject.orchestrate import inject
    from probes import ALL_PROBES

    names = sorted(ALL_PROBES) if action == "attach" else []
    t0 = time.monotonic()
    try:
        out = inject(target.pid, action, names=names, board_dir=board_dir, method=method, timeout_s=timeout_s)
    except AttachError as exc:
        return {"action": action, "ok": False, "error": str(exc)[:300], "exit_code": exc.exit_code}
    t1 = time.monotonic()
    row = {"action": action, "ok": bool(out.result.get("ok")), "error": out.result.get("error"),
           "paused_ms": None if out.paused_s is None else round(1e3 * out.paused_s, 3),
           "threads_paused": out.threads_paused, "total_ms": round(1e3 * out.total_s, 1),
           "ran_after_ms": round(1e3 * out.waited_s, 1), "bootstrap_ms": round(float(out.result.get("cost_ms") or 0), 1),
           "nudged": out.nudged, "hooks_left": out.result.get("hooks_left")}
    row.update(_driver_steps(out.transcript))
    row.update(target.seen(t0, t1, baseline_ms))
    return row


def _driver_steps(transcript: tuple[str, ...]) -> dict[str, Any]:
    """ptrace: the pause split in two, from the driver's own timeline: ``to_stop_ms`` (from the interrupt until
    the thread stopped: it waited for a CPU to reach the stop, blocked where it was) and ``held_ms`` (stopped
    until resumed: the calls, the restore, the detach)."""
    for line in transcript:
        if line.startswith("ptrace driver: "):
            report = json.loads(line[len("ptrace driver: "):])
            steps = report.get("steps_us") or {}
            out = {}
            if "stopped" in steps and "resumed" in steps:
                out = {"to_stop_ms": round(steps["stopped"] / 1e3, 3),
                       "held_ms": round((steps["resumed"] - steps["stopped"]) / 1e3, 3)}
            pauses, runq = report.get("pauses_us") or {}, report.get("pause_runq_us") or {}
            if pauses:
                longest = max(pauses, key=lambda tid: pauses[tid])
                if longest in runq:
                    out["runq_ms"] = round(runq[longest] / 1e3, 3)
            return out
    return {}


def own_pause_ms(row: dict[str, Any]) -> float:
    """The pause less what another load on the machine added (the helper and the held thread runnable without a
    CPU): the injector's own cost, which the goal bounds."""
    return max(0.0, (row.get("paused_ms") or 0.0) - (row.get("runq_ms") or 0.0))


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 3) if values else None


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    good = [r for r in rows if r.get("ok")]

    def col(key: str) -> list[float]:
        return [float(r[key]) for r in good if r.get(key) is not None]

    return {"injections": len(rows), "failed": len(rows) - len(good),
            "paused_ms_median": _median(col("paused_ms")), "paused_ms_max": max(col("paused_ms"), default=None),
            "to_stop_ms_median": _median(col("to_stop_ms")), "held_ms_median": _median(col("held_ms")),
            "runq_ms_max": max(col("runq_ms"), default=None),
            "threads_paused_max": max((int(v) for v in col("threads_paused")), default=None),
            "hole_ms_median": _median(col("hole_ms")), "hole_ms_max": max(col("hole_ms"), default=None),
            "bootstrap_ms_median": _median(col("bootstrap_ms")), "ran_after_ms_median": _median(col("ran_after_ms")),
            "total_ms_median": _median(col("total_ms"))}


def run_target(kind: str, methods: list[str], args: argparse.Namespace, work: Path, env: dict[str, str],
               deadline: float) -> dict[str, Any]:
    board_dir = Path(env["DFLASH_DIAG_BOARD_DIR"])
    target = Target(kind, args, work, env)
    out: dict[str, Any] = {"target": kind, "pid": target.pid, "methods": {}}
    try:
        base = target.baseline(args.quiet_s)
        out["baseline"] = base
        baseline_ms = base.get("step_ms_median")
        for method in methods:
            if target.proc.poll() is not None:  # the last method killed it (gdb can, where it cannot restore state)
                out.setdefault("target_died_after", []).append(list(out["methods"])[-1] if out["methods"] else None)
                target = Target(kind, args, work, env)
                out.setdefault("restarted_pids", []).append(target.pid)
            rows: list[dict[str, Any]] = []
            for _ in range(args.rounds):
                if time.monotonic() > deadline:
                    out["methods"][method] = {"skipped": "the --budget-s ran out", "rows": rows}
                    break
                for action in ("attach", "detach"):
                    rows.append({"method": method, **inject_once(target, action, method, board_dir, args.timeout,
                                                                 baseline_ms)})
                    print(f"  {kind} {method} {action}: {json.dumps(rows[-1])[:240]}", flush=True)
            else:
                out["methods"][method] = {"rows": rows, **summarise(rows)}
        out["after"] = target.baseline(args.quiet_s)
    finally:
        target.stop()
        out["tail"] = target.steps.tail[-5:]
    return out


def write(out_dir: Path, report: dict[str, Any]) -> None:
    (out_dir / "attach_pause.json").write_text(json.dumps(report, indent=1))
    lines = [f"# attach pause per method on {report['machine']}", "",
             f"`{report['command']}` ({report['date']}, Python {report['python']}, {report['cpu']})", ""]
    for t in report["targets"]:
        base = t.get("baseline", {})
        noise = (f"quiet window: longest gap {base.get('hole_ms')} ms ({base.get('threads_with_gap')} threads)"
                 if t["target"] == "heartbeat" else
                 f"quiet window: median step {base.get('step_ms_median')} ms, longest {base.get('step_ms_max')} ms")
        lines += [f"## {t['target']} (PID {t['pid']}; {noise})", "",
                  "| method | injections (failed) | pause median / max (ms) | of which to stop / held, median (ms) | "
                  "of the longest, runnable without a CPU (ms) | threads paused | hole the program saw, median / max (ms) | probes ran after, median (ms) | "
                  "bootstrap median (ms) | command median (ms) |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for name, m in t["methods"].items():
            if "skipped" in m:
                lines.append(f"| {name} | skipped: {m['skipped']} | | | | | | | | |")
                continue
            split = f"{m['to_stop_ms_median']} / {m['held_ms_median']}" if m["held_ms_median"] is not None else "-"
            lines.append(f"| {name} | {m['injections']} ({m['failed']}) | {m['paused_ms_median']} / {m['paused_ms_max']} | "
                         f"{split} | {m['runq_ms_max'] if m['runq_ms_max'] is not None else '-'} | "
                         f"{m['threads_paused_max']} | {m['hole_ms_median']} / {m['hole_ms_max']} | "
                         f"{m['ran_after_ms_median']} | {m['bootstrap_ms_median']} | {m['total_ms_median']} |")
        lines.append("")
    for name, why in report["not_run"].items():
        lines.append(f"- {name}: not run ({why})")
    if report.get("error"):
        lines += ["", f"error: {report['error']}"]
    lines += ["", f"all checks passed: {report['ok']}"]
    (out_dir / "attach_pause.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--methods", default="all", help="comma list of " + ", ".join(METHODS) + ", or all")
    ap.add_argument("--target", choices=("heartbeat", "trainer", "both"), default="both")
    ap.add_argument("--rounds", type=int, default=3, help="attach + detach cycles per method and target")
    ap.add_argument("--preset", default="tiny", help="the trainer's preset")
    ap.add_argument("--warmup-s", type=float, default=None, help="steady steps before measuring (10 tiny, 45 else)")
    ap.add_argument("--quiet-s", type=float, default=3.0, help="the baseline window, before and after")
    ap.add_argument("--timeout", type=float, default=60.0, help="each injection's --timeout")
    ap.add_argument("--max-s", type=float, default=600.0, help="the trainer's --max-seconds")
    ap.add_argument("--budget-s", type=float, default=900.0, help="the whole run; what is left is skipped")
    ap.add_argument("--dry-run", action="store_true", help="CPU check: heartbeat, ptrace, 1 round, short windows")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    if args.dry_run:
        args.methods, args.target, args.rounds, args.quiet_s, args.budget_s = "ptrace", "heartbeat", 1, 1.0, 120.0
    args.warmup_s = args.warmup_s if args.warmup_s is not None else (10.0 if args.preset == "tiny" else 45.0)
    wanted = list(METHODS) if args.methods == "all" else [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = sorted(set(wanted) - set(METHODS))
    if unknown or args.rounds < 1:
        ap.error(f"unknown methods {unknown} (one of {', '.join(METHODS)}), or --rounds < 1")
    methods, not_run = available(wanted)
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="attach-pause-"))
    boards = work / "boards"
    boards.mkdir(mode=0o700)
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "PYTHONPATH": str(ROOT),
           "DFLASH_DIAG_BOARD_DIR": str(boards), "WANDB_MODE": "disabled"}
    report: dict[str, Any] = {
        "command": " ".join([sys.executable, *sys.argv]), "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": platform.node(), "cpu": f"{platform.machine()}, {os.cpu_count()} cores",
        "python": sys.version.split()[0], "load_avg": os.getloadavg(), "methods": methods, "not_run": not_run,
        "targets": [],
    }
    deadline = time.monotonic() + args.budget_s
    kinds = ("heartbeat", "trainer") if args.target == "both" else (args.target,)
    try:
        for kind in kinds:
            print(f"{kind}: methods {', '.join(methods) or 'none'}", flush=True)
            report["targets"].append(run_target(kind, methods, args, work, env, deadline))
    except Exception as exc:  # a failed bench still writes what it saw
        report["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        # the targets' scripts, boards, gap logs and checkpoints: the bench's own scratch, read into the report
        shutil.rmtree(work, ignore_errors=True)
    report["ok"] = _ok(report)
    write(args.out, report)
    return 0 if report["ok"] else 1


def _ok(report: dict[str, Any]) -> bool:
    if report.get("error") or not report["targets"]:
        return False
    for t in report["targets"]:
        for name, m in t["methods"].items():
            rows = m.get("rows", [])
            if any(not r.get("ok") or r.get("hooks_left") for r in rows):
                return False
            if name == "ptrace" and any(own_pause_ms(r) >= PAUSE_GOAL_MS for r in rows):
                return False
    return True


if __name__ == "__main__":
    sys.exit(main())
