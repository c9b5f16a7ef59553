"""`dflash-diag attach` on a live trainer started WITHOUT probes: time, cost, diagnosis, detach, cycles.

One reference-trainer process (``--probes none --scenario reentrant --log-interval 1``) runs throughout:

1. wait for steady steps, then measure its tok/s (median of its per-step log lines) for ``--phase-s``;
2. ``dflash-diag attach PID --json`` (the debugger of ``--method``): wall time, how long the process was
   stopped, how long until the probes ran; tok/s for a phase while attached;
3. ``dflash-diag doctor PID --json``: it must name the probe-only cause (``checkpoint-grad-none``: the
   reentrant scenario's layers get no gradient, invisible without the probes);
4. ``dflash-diag detach PID --json``: hooks left (must be none); tok/s for a phase after;
5. ``--cycles`` attach/detach cycles (the library call, timed): no step may be lost (one log line per step,
   numbered), no hook left.

Writes ``attach_session.json`` and ``attach_session.md`` (and the debugger's transcript) to ``--out``. Exit 1
when a check fails (cause not named, hook left, step lost), so a run that "worked" is a run that passed.

  .venv/bin/python bench/attach_session.py --preset tiny --method gdb --out /tmp/attach-cpu          # CPU dry run
  .venv/bin/python bench/attach_session.py --preset tiny --cycles 20 --phase-s 10 --out /tmp/cycles  # 20 cycles
  python bench/attach_session.py --preset qwen3.5-4b --method cuda-gdb --out /tmp/attach-h200        # the H200
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
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

STEP_LINE = re.compile(r"^step\s+(\d+)\s+\|\s+tok/s\s+([\d,\.]+)")
PROBE_ONLY_RULE = "checkpoint-grad-none"


@dataclass
class StepLog:
    points: list[tuple[float, int, float]] = field(default_factory=list)  # (monotonic, step, tok/s)
    tail: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def follow(self, stream: Any) -> None:
        for line in stream:
            with self.lock:
                self.tail = (self.tail + [line.rstrip()])[-40:]
                m = STEP_LINE.match(line)
                if m:
                    self.points.append((time.monotonic(), int(m[1]), float(m[2].replace(",", ""))))

    def since(self, t0: float, t1: float) -> list[float]:
        with self.lock:
            return [v for t, _, v in self.points if t0 <= t <= t1]

    def steps(self) -> list[int]:
        with self.lock:
            return [s for _, s, _ in self.points]


def _cli(args: list[str], env: dict[str, str], timeout_s: float = 180.0) -> tuple[subprocess.CompletedProcess[str], float]:
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "dflash_diag", *args], env=env, capture_output=True, text=True,
                         timeout=timeout_s, cwd=ROOT)
    return res, time.monotonic() - t0


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _phase(log: StepLog, seconds: float, name: str) -> dict[str, Any]:
    t0 = time.monotonic()
    time.sleep(seconds)
    values = log.since(t0, time.monotonic())
    print(f"  {name}: {len(values)} steps, median {(_median(values) or 0):,.0f} tok/s", flush=True)
    return {"phase": name, "seconds": seconds, "steps": len(values), "tok_s_median": _median(values)}


def _debugger_version(method: str) -> str | None:
    from dflash_diag.inject.method import find_debugger

    path = find_debugger(method) if method in ("gdb", "cuda-gdb", "lldb") else None
    if path is None:
        return None
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    return f"{path}: {out.splitlines()[0] if out else '?'}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--scenario", default="reentrant")
    ap.add_argument("--method", default="auto", help="auto | gdb | cuda-gdb | lldb | remote-exec")
    ap.add_argument("--warmup-s", type=float, default=None, help="wait this long for steady steps (default: 10 on tiny, 45 else)")
    ap.add_argument("--phase-s", type=float, default=20.0, help="seconds of each tok/s phase")
    ap.add_argument("--cycles", type=int, default=3, help="attach/detach cycles after the phases")
    ap.add_argument("--doctor-s", type=float, default=8.0)
    ap.add_argument("--max-s", type=float, default=230.0, help="the trainer's --max-seconds (the whole run's bound)")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("trainer_args", nargs=argparse.REMAINDER, help="-- extra reference_trainer arguments")
    args = ap.parse_args()
    warmup_s = args.warmup_s if args.warmup_s is not None else (10.0 if args.preset == "tiny" else 45.0)
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="attach-session-"))
    boards = work / "boards"
    boards.mkdir(mode=0o700)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "DFLASH_DIAG_BOARD_DIR": str(boards), "WANDB_MODE": "disabled"}
    extra = [a for a in args.trainer_args if a != "--"]
    cmd = [sys.executable, "-m", "reference_trainer", "--preset", args.preset, "--scenario", args.scenario,
           "--probes", "none", "--wandb", "off", "--log-interval", "1", "--max-seconds", str(args.max_s),
           "--checkpoint-dir", str(work / "ckpt"), *extra]
    print("trainer:", " ".join(cmd), flush=True)
    trainer = subprocess.Popen(cmd, env=env, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    log = StepLog()
    threading.Thread(target=log.follow, args=(trainer.stdout,), daemon=True).start()
    report: dict[str, Any] = {
        "command": " ".join([sys.executable, *sys.argv]), "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": platform.node(), "cpu": platform.processor() or platform.machine(), "python": sys.version.split()[0],
        "preset": args.preset, "scenario": args.scenario, "method": args.method, "trainer_pid": trainer.pid,
        "debugger": _debugger_version(args.method if args.method != "auto" else "gdb"),
        "checks": {}, "phases": [],
    }
    ok = True
    try:
        ok = _session(args, warmup_s, env, trainer, log, report)
    except Exception as exc:  # a failed bench still writes what it saw
        report["error"] = f"{type(exc).__name__}: {exc}"
        ok = False
    finally:
        if trainer.poll() is None:
            trainer.send_signal(signal.SIGTERM)
            try:
                trainer.wait(timeout=60)
            except subprocess.TimeoutExpired:
                trainer.kill()
        report["trainer_tail"] = log.tail[-15:]
        report["ok"] = ok
        _write(args.out, report)
    return 0 if ok else 1


def _session(args: argparse.Namespace, warmup_s: float, env: dict[str, str], trainer: subprocess.Popen[str],
             log: StepLog, report: dict[str, Any]) -> bool:
    from dflash_diag.inject.orchestrate import inject

    pid = trainer.pid
    deadline = time.monotonic() + warmup_s + 600
    while len(log.steps()) < 5 and trainer.poll() is None and time.monotonic() < deadline:
        time.sleep(0.5)
    if trainer.poll() is not None or len(log.steps()) < 5:
        raise RuntimeError("the trainer did not reach steady steps")
    time.sleep(warmup_s)
    report["phases"].append(_phase(log, args.phase_s, "before attach"))
    res, wall_s = _cli(["attach", str(pid), "--json", "-v", "--method", args.method, "--timeout", "60"], env)
    (args.out / "attach_transcript.txt").write_text(res.stderr)
    if res.returncode != 0:
        raise RuntimeError(f"attach failed ({res.returncode}): {res.stderr.strip().splitlines()[-1:]}")
    attach = json.loads(res.stdout)
    report["attach"] = {"wall_s": round(wall_s, 3), "method": attach["method"], "debugger": attach["debugger"],
                        "python": attach["python"], "stopped_s": attach["stopped_s"], "waited_s": attach["waited_s"],
                        "total_s": attach["total_s"], "nudged_main_thread": attach["nudged_main_thread"],
                        "bootstrap_ms": attach["result"].get("cost_ms"), "thread": attach["result"].get("thread"),
                        "added": attach["result"].get("added"), "discovered": attach["result"].get("discovered")}
    print(f"  attach: {wall_s:.2f} s wall, process stopped {attach['stopped_s']} s, ran {attach['waited_s']} s later",
          flush=True)
    report["phases"].append(_phase(log, args.phase_s, "attached"))
    res, wall_s = _cli(["doctor", str(pid), "--json", "--duration", str(args.doctor_s)], env)
    findings = json.loads(res.stdout)["findings"] if res.returncode in (0, 10) and res.stdout else []
    rules = {f["rule_id"]: f["severity"] for f in findings}
    report["doctor"] = {"wall_s": round(wall_s, 3), "rules": rules, "returncode": res.returncode,
                        "grad_none": next((f["claim"] for f in findings if f["rule_id"] == PROBE_ONLY_RULE), None)}
    report["checks"]["probe_only_cause_named"] = rules.get(PROBE_ONLY_RULE) == "critical"
    print(f"  doctor: {rules}", flush=True)
    res, wall_s = _cli(["detach", str(pid), "--json", "--method", args.method, "--timeout", "60"], env)
    detach = json.loads(res.stdout) if res.stdout else {"result": {"hooks_left": ["detach failed: " + res.stderr]}}
    report["detach"] = {"wall_s": round(wall_s, 3), "stopped_s": detach.get("stopped_s"),
                        "hooks_left": detach["result"].get("hooks_left")}
    report["checks"]["detach_left_no_hook"] = res.returncode == 0 and detach["result"].get("hooks_left") == []
    report["phases"].append(_phase(log, args.phase_s, "after detach"))
    cycles = []
    for _ in range(args.cycles):
        t0 = time.monotonic()
        up = inject(pid, "attach", names=report["attach"]["added"] or [], board_dir=Path(env["DFLASH_DIAG_BOARD_DIR"]),
                    method=args.method, timeout_s=60)
        down = inject(pid, "detach", board_dir=Path(env["DFLASH_DIAG_BOARD_DIR"]), method=args.method, timeout_s=60)
        cycles.append({"seconds": round(time.monotonic() - t0, 3), "attach_stopped_s": up.stopped_s,
                       "detach_stopped_s": down.stopped_s, "ok": bool(up.result.get("ok") and down.result.get("ok")),
                       "hooks_left": down.result.get("hooks_left")})
    time.sleep(3.0)
    steps = log.steps()
    lost = sorted(set(range(steps[0], steps[-1] + 1)) - set(steps)) if steps else []
    report["cycles"] = {"n": len(cycles), "all_ok": all(c["ok"] for c in cycles),
                        "hooks_left": sorted({h for c in cycles for h in (c["hooks_left"] or [])}),
                        "seconds_median": _round(_median([c["seconds"] for c in cycles])),
                        "stopped_s_median": _round(_median([s for c in cycles for s in (c["attach_stopped_s"], c["detach_stopped_s"])
                                                     if s is not None])),
                        "steps_logged": len(steps), "steps_lost": lost[:50], "per_cycle": cycles}
    report["checks"]["cycles_no_hook_no_step_lost"] = (report["cycles"]["all_ok"] and not report["cycles"]["hooks_left"]
                                                      and not lost)
    before, attached, after = (p["tok_s_median"] for p in report["phases"])
    report["tok_s_ratio_attached"] = round(attached / before, 4) if before and attached else None
    report["tok_s_ratio_after"] = round(after / before, 4) if before and after else None
    return all(report["checks"].values())


def _write(out: Path, report: dict[str, Any]) -> None:
    (out / "attach_session.json").write_text(json.dumps(report, indent=1))
    a, d, c = report.get("attach", {}), report.get("detach", {}), report.get("cycles", {})
    phases = {p["phase"]: p for p in report["phases"]}

    def tok(name: str) -> str:
        v = phases.get(name, {}).get("tok_s_median")
        return f"{v:,.0f}" if v else "n/a"

    lines = [
        f"# attach session: {report['preset']} / {report['scenario']} on {report['machine']}",
        "",
        f"`{report['command']}` ({report['date']}, Python {report['python']}, {report.get('debugger') or report['method']})",
        "",
        "| measure | value |",
        "| --- | --- |",
        f"| attach: wall time of `dflash-diag attach` | {a.get('wall_s', 'n/a')} s |",
        f"| attach: process stopped by {a.get('method', '?')} | {a.get('stopped_s', 'n/a')} s |",
        f"| attach: probes ran after (thread {a.get('thread', '?')}, woken from a lock: {a.get('nudged_main_thread')}) | {a.get('waited_s', 'n/a')} s |",
        f"| attach: bootstrap inside the process | {a.get('bootstrap_ms') and round(a['bootstrap_ms'])} ms |",
        f"| tok/s before attach (median per step) | {tok('before attach')} |",
        f"| tok/s attached | {tok('attached')} (x{report.get('tok_s_ratio_attached')}) |",
        f"| tok/s after detach | {tok('after detach')} (x{report.get('tok_s_ratio_after')}) |",
        f"| doctor names `{PROBE_ONLY_RULE}` | {report['checks'].get('probe_only_cause_named')} |",
        f"| detach: stopped / hooks left | {d.get('stopped_s', 'n/a')} s / {d.get('hooks_left')} |",
        f"| {c.get('n', 0)} attach/detach cycles: median seconds, median stopped | {c.get('seconds_median')} s, {c.get('stopped_s_median')} s |",
        f"| cycles: steps logged / lost / hooks left | {c.get('steps_logged')} / {c.get('steps_lost')} / {c.get('hooks_left')} |",
        f"| all checks passed | {report['ok']} |",
    ]
    if report.get("error"):
        lines += ["", f"error: {report['error']}"]
    (out / "attach_session.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    sys.exit(main())
