"""What `dflash-diag record --kernels` costs a running trainer, and whether its trace is right: one bounded command.

Starts the reference trainer (``--preset``, its own probes on: the trace carries their counters), waits for its
warm-up, then measures its throughput in three windows:

- **before**: ``--window-s`` seconds untouched (after another such window: the two say how noisy the machine is);
- **during**: ``dflash-diag record --kernels PID --steps N`` (torch.profiler started inside the trainer through the
  attach machinery, stopped, exported and taken out). Two figures: the steps per second *while the profiler
  records* (exact: from the optimizer step marks the recording leaves in the trace) and over the *whole command*
  (the injection, the recording, the stop and the export, which hold the trainer's GIL: ``stop_ms``,
  ``export_ms`` as the trainer measured them);
- **after**: ``--window-s`` seconds once the command has exited: the profiler fully removed.

Steps per second come from the trainer's board (its step counter, published twice a second, no sync added);
tok/s from its own log lines (one per 10 steps). Then the trace is checked: valid Trace Event Format
(tests/export/trace_format.py, the rules the tests use) and, when the ``perfetto`` package and its
trace_processor can run here, loaded by Perfetto's own trace processor; CUDA kernels present on stream tracks
(on a GPU), the training threads' CPU ops on their named tracks, our sampled states, the probes' counters, the
launch arrows. ``--fixture PATH`` also records one short trace (``--steps 1``, at most 20,000 events) for the tests
(tests/fixtures/kernels/README.md).

Writes ``record_kernels.json`` and ``record_kernels.md`` (and the trace) to ``--out``. Bounded: every wait has a
limit and the whole run ``--budget-s`` (default 450 s: under 8 minutes). Exit 1 when a check failed.

  .venv/bin/python bench/record_kernels.py --dry-run --out /tmp/rk-dry                        # CPU, tested
  .venv/bin/python bench/record_kernels.py --preset tiny --window-s 20 --steps 20 --out /tmp/rk-cpu
  .venv/bin/python bench/record_kernels.py --micro 5 --out /tmp/rk-micro        # the cost per op, in-process
  python bench/record_kernels.py --preset qwen3.5-4b --steps 5 --out /tmp/rk-h200 \\
      --fixture tests/fixtures/h200/kernels-qwen3.5-4b.json
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
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "export")]

LOG_LINE = re.compile(r"^step\s+(\d+)\s+\|\s+tok/s\s+([\d,.]+)")


@dataclass
class Watch:
    """The trainer as seen from outside: board readings (monotonic time, step) and log lines (time, tok/s)."""

    board: Path
    steps: list[tuple[float, int]] = field(default_factory=list)
    tok: list[tuple[float, float]] = field(default_factory=list)
    tail: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def follow_log(self, stream: Any) -> None:
        for line in stream:
            self.tail = (self.tail + [line.rstrip()])[-20:]
            m = LOG_LINE.match(line)
            if m:
                self.tok.append((time.monotonic(), float(m[2].replace(",", ""))))

    def poll_board(self) -> None:
        last = -1
        while not self.stop.is_set():
            try:
                step = json.loads(self.board.read_text()).get("session", {}).get("steps")
            except (OSError, ValueError, AttributeError):
                step = None
            if isinstance(step, int) and step != last:
                self.steps.append((time.monotonic(), step))
                last = step
            time.sleep(0.05)

    def step(self) -> int:
        return self.steps[-1][1] if self.steps else 0

    def window(self, t0: float, t1: float) -> dict[str, Any]:
        """Steps/s over [t0, t1] from the board's counter; mean tok/s of the log lines that arrived in it."""
        inside = [(t, s) for t, s in self.steps if t0 <= t <= t1]
        rate = None
        if len(inside) >= 2 and inside[-1][0] > inside[0][0]:
            rate = (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])
        tok = [v for t, v in self.tok if t0 <= t <= t1]
        return {"seconds": round(t1 - t0, 2), "steps_per_s": None if rate is None else round(rate, 3),
                "tok_per_s": round(statistics.mean(tok), 1) if tok else None, "log_lines": len(tok)}


class Trainer:
    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.board_dir = work / "boards"
        self.board_dir.mkdir(mode=0o700, exist_ok=True)
        self.env = {**os.environ, "DFLASH_DIAG_BOARD_DIR": str(self.board_dir), "WANDB_MODE": "disabled",
                    "PYTHONPATH": str(ROOT)}
        cmd = [sys.executable, "-m", "reference_trainer", "--preset", args.preset, "--wandb", "off",
               "--max-seconds", str(int(args.budget_s) + 60), "--checkpoint-dir", str(work / "ckpt")]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=self.env,
                                     cwd=work)
        self.pid = self.proc.pid
        self.watch = Watch(self.board_dir / f"{self.pid}.json")
        threading.Thread(target=self.watch.follow_log, args=(self.proc.stdout,), daemon=True).start()
        threading.Thread(target=self.watch.poll_board, daemon=True).start()

    def warm(self, steps: int, deadline: float) -> None:
        while self.watch.step() < steps:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the trainer did not reach {steps} steps: {' | '.join(self.watch.tail[-3:])}")
            time.sleep(0.2)

    def stop(self) -> None:
        self.watch.stop.set()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def record(trainer: Trainer, out: Path, extra: list[str], timeout_s: float) -> tuple[dict[str, Any], float, float]:
    """One `record --kernels`; (its --json, start, end on the monotonic clock)."""
    cmd = [sys.executable, "-m", "dflash_diag", "record", "--kernels", str(trainer.pid), "--board-dir",
           str(trainer.board_dir), "-o", str(out), "--force", "--json", *extra]
    t0 = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, env=trainer.env, cwd=ROOT, timeout=timeout_s)
    t1 = time.monotonic()
    if done.returncode != 0:
        raise RuntimeError(f"record --kernels exited {done.returncode}: {done.stderr.strip()[-400:]}")
    return json.loads(done.stdout), t0, t1


def marked_rate(doc: dict[str, Any]) -> dict[str, Any]:
    """Steps/s while the profiler recorded, from the step marks of the thread that stepped most."""
    marks: dict[int, list[float]] = {}
    for e in doc["traceEvents"]:
        if e.get("cat") == "step" and e.get("ph") == "i":
            marks.setdefault(e["tid"], []).append(e["ts"])
    best = max(marks.values(), key=len, default=[])
    if len(best) < 2:
        return {"steps_per_s": None, "marks": len(best)}
    times = sorted(best)
    span_s = (times[-1] - times[0]) / 1e6
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    return {"steps_per_s": round((len(times) - 1) / span_s, 3) if span_s > 0 else None, "marks": len(times),
            "step_ms_median": round(statistics.median(gaps) / 1e3, 2)}


def check_trace(path: Path, cuda_expected: bool) -> dict[str, Any]:
    from trace_format import strict_json, validate_trace

    data = path.read_bytes()
    doc = strict_json(data)
    problems = validate_trace(doc)
    events = doc["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    cats: dict[str, int] = {}
    for e in events:
        cats[str(e.get("cat"))] = cats.get(str(e.get("cat")), 0) + 1
    with_ops = sorted({names.get(e["tid"], "?") for e in events if e.get("cat") == "cpu_op"})
    streams = sorted(n for n in names.values() if n.startswith("cuda:"))
    checks = {
        "valid_trace_event_format": not problems,
        "kernels_on_stream_tracks": (cats.get("kernel", 0) > 0 and bool(streams)) if cuda_expected else None,
        "training_threads_have_cpu_ops": any(n.startswith(("target-", "drafter-")) for n in with_ops),
        "sampled_thread_states": cats.get("state", 0) > 0,
        "probe_counters": any(e["ph"] == "C" for e in events),
        "launch_arrows": (cats.get("launch", 0) > 0) if cuda_expected else None,
    }
    return {"bytes": len(data), "events": len(events), "by_cat": dict(sorted(cats.items(), key=lambda kv: -kv[1])[:12]),
            "streams": streams, "threads_with_cpu_ops": with_ops[:16], "problems": problems[:10], "checks": checks,
            "trace_processor": trace_processor(path), "marked": marked_rate(doc)}


def trace_processor(path: Path) -> dict[str, Any]:
    """Perfetto's own trace processor on the file, when it can run here (it downloads its binary at first use)."""
    try:
        from perfetto.trace_processor import TraceProcessor  # type: ignore[import-not-found]
    except ImportError:
        return {"ran": False, "why": "the perfetto package is not installed (pip install perfetto)"}
    try:
        tp = TraceProcessor(trace=str(path))
        slices = next(iter(tp.query("select count(*) as n from slice"))).n
        threads = next(iter(tp.query("select count(*) as n from thread"))).n
        tp.close()
        return {"ran": True, "slices": slices, "threads": threads}
    except Exception as exc:  # no binary and no network: say so, the schema check stands
        return {"ran": False, "why": f"{type(exc).__name__}: {str(exc)[:200]}"}


def run(args: argparse.Namespace, out: Path, say: Callable[[str], None]) -> dict[str, Any]:
    work = out / "work"
    work.mkdir(parents=True, exist_ok=True)
    t_start = time.monotonic()
    deadline = t_start + args.budget_s
    trainer = Trainer(args, work)
    result: dict[str, Any] = {"preset": args.preset, "steps": args.steps, "window_s": args.window_s}
    try:
        say(f"trainer PID {trainer.pid}: warming up ({args.warm_steps} steps)")
        trainer.warm(args.warm_steps, deadline - 3 * args.window_s - 120)
        t0 = time.monotonic()
        time.sleep(args.window_s)
        result["quiet"] = trainer.watch.window(t0, time.monotonic())  # two untouched windows: the machine's noise
        t0 = time.monotonic()
        time.sleep(args.window_s)
        result["before"] = trainer.watch.window(t0, time.monotonic())
        say(f"before: {result['before']}; recording --steps {args.steps}")
        trace = out / "trace.json"
        summary, r0, r1 = record(trainer, trace, ["--steps", str(args.steps)], max(60.0, deadline - time.monotonic() - 60))
        result["record"] = {k: summary.get(k) for k in (
            "reason", "steps", "profiled_s", "stop_ms", "export_ms", "torch_trace_bytes", "bytes", "events",
            "torch_events", "left_out", "gpu_spans", "streams", "host_spans", "torch_threads", "clock", "method",
            "paused_ms", "cuda", "torch", "headlines")}
        result["record"]["command_s"] = round(r1 - r0, 2)
        result["record"]["kernel_summary"] = summary.get("kernels")
        time.sleep(1.0)
        result["during_command"] = trainer.watch.window(r0, r1)
        a0 = time.monotonic()
        time.sleep(args.window_s)
        result["after"] = trainer.watch.window(a0, time.monotonic())
        result["trace"] = check_trace(trace, cuda_expected=bool(summary.get("cuda")))
        result["during_recording"] = result["trace"]["marked"]
        if args.fixture:
            fixture_out = work / "fixture.json"
            record(trainer, fixture_out, ["--steps", "1", "--max-events", "20000"], 120)
            Path(args.fixture).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(fixture_out, args.fixture)
            result["fixture"] = {"path": str(args.fixture), "bytes": fixture_out.stat().st_size}
        result["trainer_alive"] = trainer.proc.poll() is None
    finally:
        trainer.stop()
        result["elapsed_s"] = round(time.monotonic() - t_start, 1)
    return result


def micro(seconds: float, work: Path, rounds: int = 3) -> dict[str, Any]:
    """The recording's cost per op, in this process: a thread runs small matmuls (one intra-op thread) for
    ``seconds`` untouched, then while `probes.kernels` records (every thread), then after, ``rounds`` times
    (medians: a shared machine's load moves between windows); a second thread ticks every millisecond and reports
    its longest gap while the profiler stops and exports (they hold the GIL)."""
    import torch

    from probes import kernels

    torch.set_num_threads(1)
    counter, stop = [0], threading.Event()

    def loop() -> None:
        x = torch.randn(16, 16)
        while not stop.is_set():
            torch.mm(x, x)
            counter[0] += 1

    def us_per_op() -> float:
        c0, t0 = counter[0], time.monotonic()
        time.sleep(seconds)
        return 1e6 * (time.monotonic() - t0) / max(1, counter[0] - c0)

    gaps: list[tuple[float, float]] = []

    def tick() -> None:
        last = time.monotonic()
        while not stop.is_set():
            time.sleep(0.001)
            now = time.monotonic()
            gaps.append((now, now - last))
            last = now

    boards = work / "micro"
    boards.mkdir(mode=0o700, exist_ok=True)
    threads = [threading.Thread(target=loop, daemon=True), threading.Thread(target=tick, daemon=True)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    rows: list[dict[str, float]] = []
    for r in range(rounds):
        prefix = str(boards / f".attach-1.{r:016x}")
        before = us_per_op()
        started = kernels.start({"duration_s": seconds + 0.3, "steps": None}, files_prefix=prefix, lease=None)
        if not started.get("ok"):
            raise RuntimeError(f"the recording did not start: {started}")
        during = us_per_op()
        t_end = time.monotonic()
        while not os.path.exists(prefix + ".kernels"):
            time.sleep(0.01)
        stopped_at = time.monotonic()
        outcome = json.loads(Path(prefix + ".kernels").read_text())
        after = us_per_op()
        events = len(json.loads(Path(prefix + ".trace.json").read_text())["traceEvents"])
        for suffix in (".trace.json", ".kernels"):  # hundreds of MB a round: not kept
            os.unlink(prefix + suffix)
        longest = max((g for t, g in gaps if t_end - 0.5 <= t <= stopped_at + 0.2), default=0.0)
        rows.append({"before_us_per_op": before, "while_recording_us_per_op": during, "after_us_per_op": after,
                     "events": events, "stop_ms": outcome["stop_ms"], "export_ms": outcome["export_ms"],
                     "stop_us_per_event": 1e3 * outcome["stop_ms"] / events,
                     "export_us_per_event": 1e3 * outcome["export_ms"] / events,
                     "longest_gap_ms": 1e3 * longest})
    stop.set()
    return {"seconds": seconds, "rounds": rows,
            "median": {k: round(statistics.median(row[k] for row in rows), 2) for k in rows[0]}}


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else round(a / b, 3)


def markdown(r: dict[str, Any], machine: str) -> str:
    rec, tr = r.get("record", {}), r.get("trace", {})
    before = (r.get("before") or {}).get("steps_per_s")
    rows = [
        ("an earlier untouched window (noise)", r.get("quiet", {}).get("steps_per_s"), r.get("quiet", {}).get("tok_per_s"),
         ratio(r.get("quiet", {}).get("steps_per_s"), before)),
        ("before (untouched)", r.get("before", {}).get("steps_per_s"), r.get("before", {}).get("tok_per_s"), 1.0),
        ("while the profiler records (step marks)", r.get("during_recording", {}).get("steps_per_s"), None,
         ratio(r.get("during_recording", {}).get("steps_per_s"), before)),
        ("the whole command (inject, record, stop, export)", r.get("during_command", {}).get("steps_per_s"), None,
         ratio(r.get("during_command", {}).get("steps_per_s"), before)),
        ("after (profiler removed)", r.get("after", {}).get("steps_per_s"), r.get("after", {}).get("tok_per_s"),
         ratio(r.get("after", {}).get("steps_per_s"), before)),
    ]
    lines = [f"# record --kernels on the `{r['preset']}` trainer ({machine})", "",
             "| window | steps/s | tok/s | vs before |", "| --- | --- | --- | --- |"]
    lines += [f"| {name} | {sps} | {tok if tok is not None else '-'} | {rel} |" for name, sps, tok, rel in rows]
    clock = rec.get("clock") or {}
    lines += ["", f"- recording: {rec.get('steps')} steps in {rec.get('profiled_s')} s ({rec.get('reason')}); stop "
              f"{rec.get('stop_ms')} ms and export {rec.get('export_ms')} ms in the trainer (GIL held); injection "
              f"pause {rec.get('paused_ms')} ms ({rec.get('method')}); the command took {rec.get('command_s')} s",
              f"- trace: {tr.get('bytes')} bytes, {tr.get('events')} events ({rec.get('gpu_spans')} GPU spans on "
              f"{rec.get('streams')} streams, {rec.get('host_spans')} CPU ops and CUDA calls on "
              f"{rec.get('torch_threads')} threads), left out {rec.get('left_out')}; torch's own export "
              f"{rec.get('torch_trace_bytes')} bytes",
              f"- clock: {clock.get('method')}, +-{clock.get('uncertainty_us')} us, drift {clock.get('drift_us_per_s')} "
              "us/s",
              f"- checks: {tr.get('checks')}; Perfetto trace processor: {tr.get('trace_processor')}",
              f"- findings from the trace: {rec.get('headlines')}"]
    return "\n".join(lines) + "\n"


def failed_checks(r: dict[str, Any]) -> list[str]:
    checks = (r.get("trace") or {}).get("checks") or {}
    bad = [k for k, v in checks.items() if v is False]
    if not r.get("trainer_alive", False):
        bad.append("trainer_alive")
    return bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="qwen3.5-4b")
    ap.add_argument("--steps", type=int, default=5, help="optimizer steps to record")
    ap.add_argument("--window-s", type=float, default=20.0, help="seconds of each of the before and after windows")
    ap.add_argument("--warm-steps", type=int, default=20, help="steps the trainer runs before anything is measured")
    ap.add_argument("--budget-s", type=float, default=450.0, help="the whole run's bound")
    ap.add_argument("--fixture", help="also record a short trace (--steps 1, 20,000 events) to this path, for the tests")
    ap.add_argument("--out", required=True)
    ap.add_argument("--dry-run", action="store_true", help="CPU check: tiny preset, 2 steps, 4 s windows")
    ap.add_argument("--micro", type=float, metavar="S",
                    help="only the per-op cost, in this process: S seconds before, while recording and after")
    args = ap.parse_args()
    if args.micro:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        found = micro(args.micro, out)
        found["machine"], found["date"] = f"{platform.node()}, {os.cpu_count()} CPUs", time.strftime("%Y-%m-%d")
        (out / "record_kernels_micro.json").write_text(json.dumps(found, indent=2) + "\n")
        print(json.dumps(found, indent=2))
        return 0
    if args.dry_run:
        args.preset, args.steps, args.window_s, args.warm_steps, args.budget_s = "tiny", 2, 4.0, 4, 300.0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    machine = f"{platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    try:
        import torch

        machine += f", torch {torch.__version__}" + (f", {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else "")
    except ImportError:
        pass

    def say(message: str) -> None:
        print(f"[record_kernels] {message}", file=sys.stderr, flush=True)

    result = run(args, out, say)
    result["machine"] = machine
    result["date"] = time.strftime("%Y-%m-%d")
    result["command"] = " ".join(sys.argv)
    bad = failed_checks(result)
    result["failed"] = bad
    (out / "record_kernels.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "record_kernels.md").write_text(markdown(result, machine))
    print(markdown(result, machine))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
