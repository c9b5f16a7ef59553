"""The three exports on a real run, in one command: trace, Prometheus scrape, and wandb logging's cost.

    python bench/h200_exports.py --preset qwen3.5-4b --out /tmp/exports      # the H200, < 4 min
    python bench/h200_exports.py --preset tiny --out /tmp/exports            # dry run on CPU

1. Starts the reference trainer under ``dflash-diag run`` (all probes), waits until it has trained a few steps.
2. ``dflash-diag record PID --duration S``: a Perfetto/Chrome trace (``trace.json``, also copied to
   ``trace-<preset>.json`` for tests/fixtures/h200/) and a speedscope profile, both checked by the same
   validators as the tests (tests/export/trace_format.py).
3. ``dflash-diag export --port 0 PID``: scrapes the endpoint in Prometheus text and OpenMetrics, keeps both,
   checks the queue, GPU and allocator series are there.
4. Stops the trainer; then, when wandb is importable, ``bench/export_overhead.py``'s measurement: probe overhead
   with wandb offline logging on vs off (2 rounds x 10 steps), the trainer built once in this process (skipped, and said so, when
   wandb is not installed).

Writes ``results.json`` and ``results.md`` (a markdown table) into ``--out``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "export"))


def _board_step(path: Path) -> int:
    try:
        step = json.loads(path.read_text()).get("app", {}).get("step")
    except (OSError, ValueError):
        return -1
    return step if isinstance(step, int) else -1


def start_trainer(args: argparse.Namespace, out: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], Path]:
    board_dir = out / "boards"
    board_dir.mkdir(mode=0o700, exist_ok=True)
    log = open(out / "trainer.log", "wb")  # closed when the process is reaped
    cmd = [sys.executable, "-m", "dflash_diag", "run", "--probes", "all", "--board-dir", str(board_dir), "--",
           sys.executable, "-m", "reference_trainer", "--preset", args.preset, "--max-seconds", str(args.trainer_seconds),
           "--wandb", "off", "--log-interval", "4", "--checkpoint-dir", str(out / "ckpt")]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + args.ready_timeout
    while True:
        boards = [p for p in board_dir.glob("*.json") if _board_step(p) >= args.warm_steps]
        if boards:
            return proc, boards[0]
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise SystemExit(f"trainer not ready (exit {proc.poll()}); see {out / 'trainer.log'}")
        time.sleep(0.5)


def record(pid: int, board_dir: Path, out: Path, seconds: float, env: dict[str, str]) -> dict[str, Any]:
    from trace_format import strict_json, validate_speedscope, validate_trace

    result: dict[str, Any] = {}
    for fmt, name in (("chrome", "trace.json"), ("speedscope", "stacks.speedscope.json")):
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "dflash_diag", "record", str(pid), "--duration", str(seconds),
                               "--format", fmt, "-o", str(out / name), "--board-dir", str(board_dir), "--json", "--force"],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=seconds + 120)
        if proc.returncode != 0:
            result[fmt] = {"error": proc.stderr.strip()[-500:]}
            continue
        doc = strict_json((out / name).read_bytes())
        problems = validate_trace(doc) if fmt == "chrome" else validate_speedscope(doc)
        summary = json.loads(proc.stdout)
        summary.update(problems=problems[:10], seconds=round(time.monotonic() - t0, 1))
        if fmt == "chrome":
            events = doc["traceEvents"]
            summary["counters"] = sorted({e["name"] for e in events if e["ph"] == "C"})
            summary["states"] = sorted({e["name"] for e in events if e.get("cat") == "state"})
            summary["instants"] = sorted({e["name"] for e in events if e["ph"] == "i"})[:20]
        result[fmt] = summary
    return result


def scrape(pid: int, board_dir: Path, out: Path, env: dict[str, str]) -> dict[str, Any]:
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om
    from prometheus_client.parser import text_string_to_metric_families as parse_text

    proc = subprocess.Popen([sys.executable, "-m", "dflash_diag", "export", "--port", "0", str(pid),
                             "--board-dir", str(board_dir)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        match = re.search(r"(http://\S+/metrics)", line)
        if not match:
            return {"error": line + (proc.stderr.read() if proc.poll() is not None and proc.stderr else "")}
        url = match.group(1)
        result: dict[str, Any] = {}
        for name, accept, parse, file in (("prometheus", None, parse_text, "metrics.txt"),
                                          ("openmetrics", "application/openmetrics-text; version=1.0.0", parse_om,
                                           "metrics.openmetrics.txt")):
            t0 = time.perf_counter()
            request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
            with urllib.request.urlopen(request, timeout=30) as response:
                body = response.read().decode()
                content_type = response.headers.get("Content-Type", "")
            (out / file).write_text(body)
            names = {s.name for f in parse(body) for s in f.samples}
            result[name] = {"content_type": content_type, "scrape_ms": round(1e3 * (time.perf_counter() - t0), 2),
                            "series": len(body.splitlines()), "has": {k: k in names for k in (
                                "dflash_up", "dflash_queue_depth", "dflash_gpu_utilization_ratio",
                                "dflash_allocator_device_alloc_per_second", "dflash_app_tokens_per_second")}}
        return result
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def markdown(result: dict[str, Any]) -> str:
    lines = [f"# exports on `{result['preset']}` ({result['device']})", ""]
    rec = result.get("record", {})
    chrome, speed = rec.get("chrome", {}), rec.get("speedscope", {})
    lines += ["| export | result |", "|---|---|"]
    lines.append(f"| record (Chrome/Perfetto) | {chrome.get('stack_samples', '?')} samples, {chrome.get('threads', '?')} "
                 f"threads, {chrome.get('events', '?')} events, {chrome.get('bytes', '?')} bytes, problems: "
                 f"{chrome.get('problems', chrome.get('error'))}; counters {chrome.get('counters')} |")
    lines.append(f"| record (speedscope) | {speed.get('events', '?')} profiles, problems: "
                 f"{speed.get('problems', speed.get('error'))} |")
    for fmt, s in result.get("scrape", {}).items():
        if isinstance(s, dict):
            lines.append(f"| export ({fmt}) | {s.get('content_type')}, {s.get('series')} lines in {s.get('scrape_ms')} ms; "
                         f"{s.get('has')} |")
    wb = result.get("wandb_overhead")
    if isinstance(wb, dict) and "off" in wb:
        from export_overhead import table

        lines += ["", "## probe overhead, wandb logging on vs off", "", table(wb)]
    else:
        lines += ["", f"wandb overhead: {wb}"]
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="qwen3.5-4b")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--record-seconds", type=float, default=5.0)
    p.add_argument("--warm-steps", type=int, default=4)
    p.add_argument("--ready-timeout", type=float, default=150.0)
    p.add_argument("--trainer-seconds", type=float, default=150.0)
    p.add_argument("--rounds", type=int, default=2, help="wandb on/off rounds")
    p.add_argument("--steps", type=int, default=10, help="drafter steps per wandb on/off window")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(ROOT / "bench"))
    import torch

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    t0 = time.monotonic()
    result: dict[str, Any] = {"preset": args.preset, "torch": torch.__version__,
                              "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"}
    proc, board = start_trainer(args, args.out, env)
    pid = int(board.stem)
    result["ready_s"] = round(time.monotonic() - t0, 1)
    print(f"trainer PID {pid} ready after {result['ready_s']} s", flush=True)
    try:
        result["record"] = record(pid, board.parent, args.out, args.record_seconds, env)
        print(f"record: {json.dumps(result['record'])[:400]}", flush=True)
        result["scrape"] = scrape(pid, board.parent, args.out, env)
        print(f"scrape: {json.dumps(result['scrape'])}", flush=True)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    if (args.out / "trace.json").exists():
        shutil.copyfile(args.out / "trace.json", args.out / f"trace-{args.preset}.json")
    if importlib.util.find_spec("wandb") is None:
        result["wandb_overhead"] = "skipped: wandb is not installed here"
    else:
        from export_overhead import measure

        result["wandb_overhead"] = measure(args.preset, args.rounds, args.steps, 3, 100, [])
    result["total_s"] = round(time.monotonic() - t0, 1)
    (args.out / "results.json").write_text(json.dumps(result, indent=2))
    (args.out / "results.md").write_text(markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
