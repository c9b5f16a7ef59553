"""What each stack-sampling rate costs the trainer it watches, and what ``auto`` picks (2, 5 and 10 Hz).

One reference-trainer process runs throughout. Each round runs one phase per condition (off, 2 Hz, 5 Hz, 10 Hz,
auto) in a rotated order, so slow drift spreads over the conditions. The sampler is the real command,
``dflash-diag top --batch --json --rate R --duration S``. A condition's cost is the median over rounds of
(its phase's median tok/s) / (the same round's "off" phase median tok/s); the sampler's own CPU is what the
``top`` process and the py-spy runs it reaped used, per second of the phase.

Then (``--record``, on by default) it records what the states classifier needs as fixtures, from the same
trainer in its steady state: py-spy ``dump --json`` (non-blocking, and two ``--native``), NVML readings and
/proc per-thread readings (CPU, wchan, syscall), in tests/fixtures' layout.

  .venv/bin/python bench/sampling_rate.py --out /tmp/rate --preset tiny --rounds 1 --phase-s 5 --warmup-s 3
  python bench/sampling_rate.py --out out/sampling_rate --preset qwen3.5-4b --phase-s 6 --warmup-s 10   # H200, ~3 min

Writes ``--out/sampling_rate.json`` and ``--out/sampling_rate.md`` (and ``--out/fixtures/`` when recording).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from attach_overhead import StepLog  # noqa: E402  (the trainer's step lines, shared with that bench)

CONDITIONS: tuple[str, ...] = ("off", "2", "5", "10", "auto")


def _start_trainer(args: argparse.Namespace, workdir: Path) -> tuple[subprocess.Popen[str], StepLog]:
    total_s = args.warmup_s + args.rounds * len(CONDITIONS) * (args.phase_s + args.settle_s) + 180
    env = {**os.environ, "DFLASH_DIAG_BOARD_DIR": str(workdir / "boards"), "WANDB_MODE": "disabled"}
    (workdir / "boards").mkdir(mode=0o700)
    cmd = [sys.executable, "-m", "reference_trainer", "--preset", args.preset, "--log-interval", "1",
           "--wandb", "off", "--max-seconds", str(total_s), "--checkpoint-dir", str(workdir / "ckpt"),
           *args.trainer_args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT, env=env)
    log = StepLog()
    assert proc.stdout is not None
    threading.Thread(target=log.follow, args=(proc.stdout,), daemon=True).start()
    return proc, log


def _wait_steps(proc: subprocess.Popen[str], log: StepLog, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while log.steps() < 2:
        if proc.poll() is not None:
            sys.exit(f"sampling_rate: the trainer exited with {proc.returncode} before training")
        if time.monotonic() > deadline:
            sys.exit("sampling_rate: no step line from the trainer in time")
        time.sleep(0.5)


def _sample(pid: int, condition: str, phase_s: float, board_dir: Path) -> dict[str, Any]:
    """One phase with ``top --batch`` attached: its CPU (with the py-spy runs), samples, the rate it ran at."""
    cmd = [sys.executable, "-m", "dflash_diag", "top", "--pid", str(pid), "--batch", "--json",
           "--duration", f"{phase_s:g}", "--board-dir", str(board_dir), "--rate", condition]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=phase_s + 120, check=False)
    wall_s = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if res.returncode != 0:
        return {"error": res.stderr.strip()[-300:], "sampler_cpu_pct": 100 * cpu_s / wall_s}
    doc = json.loads(res.stdout)
    return {"samples": doc.get("samples"), "rate_hz": doc.get("rate_hz"), "rate_reason": doc.get("rate_reason"),
            "window_s": doc.get("window_s"), "sampler_cpu_pct": 100 * cpu_s / wall_s, "wall_s": wall_s}


def _phase(args: argparse.Namespace, proc: subprocess.Popen[str], log: StepLog, rnd: int, condition: str,
           board_dir: Path) -> dict[str, Any]:
    time.sleep(args.settle_s)
    start = time.monotonic()
    info: dict[str, Any] = {}
    if condition == "off":
        time.sleep(args.phase_s)
    else:
        info = _sample(proc.pid, condition, args.phase_s, board_dir)
    values = log.between(start, time.monotonic())
    return {"round": rnd, "condition": condition, "tok_s_median": statistics.median(values) if values else None,
            "steps": len(values), **info}


def _summary(phases: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for condition in CONDITIONS[1:]:
        ratios, cpu, samples, rates = [], [], [], []
        for rnd in sorted({p["round"] for p in phases}):
            off = [p for p in phases if p["round"] == rnd and p["condition"] == "off" and p["tok_s_median"]]
            on = [p for p in phases if p["round"] == rnd and p["condition"] == condition and p["tok_s_median"]]
            if off and on:
                ratios.append(on[0]["tok_s_median"] / off[0]["tok_s_median"])
            for p in on:
                cpu.append(p.get("sampler_cpu_pct"))
                samples.append(p.get("samples"))
                rates.append(p.get("rate_hz"))
        med = statistics.median(ratios) if ratios else None
        out[condition] = {
            "tok_s_ratio_median": med, "tok_s_ratios": ratios,
            "overhead_pct": None if med is None else 100 * (1 - med),
            "sampler_cpu_pct_median": _median(cpu), "samples_median": _median(samples),
            "rate_hz_median": _median(rates),
        }
    return out


def _median(values: list[Any]) -> float | None:
    nums = [v for v in values if isinstance(v, int | float)]
    return statistics.median(nums) if nums else None


def _markdown(result: dict[str, Any]) -> str:
    def f(v: float | None, fmt: str) -> str:
        return "-" if v is None else format(v, fmt)

    lines = [
        f"Command: `{result['command']}`  ",
        f"Machine: {result['machine']['host']}, {result['machine']['cpus']} CPUs, {result['machine']['gpu']}; "
        f"{result['date_utc']} UTC; preset {result['args']['preset']}, {result['args']['rounds']} rounds x "
        f"{result['args']['phase_s']:g} s phases",
        "",
        "| rate | rate in force | samples / phase | trainer tok/s on/off (median) | overhead | sampler CPU (% of a core) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for condition, s in result["summary"].items():
        label = "auto" if condition == "auto" else f"{condition} Hz"
        lines.append(f"| {label} | {f(s['rate_hz_median'], '.3g')} Hz | {f(s['samples_median'], '.0f')} | "
                     f"{f(s['tok_s_ratio_median'], '.3f')} | {f(s['overhead_pct'], '+.1f')}% | "
                     f"{f(s['sampler_cpu_pct_median'], '.1f')} |")
    return "\n".join(lines) + "\n"


# --- recording fixtures -------------------------------------------------------------------------------------


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if type(value).__name__ == "NA":
            return {"na": str(value)}
        return {k: _jsonable(v) for k, v in dataclasses.asdict(value).items()}
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    return value


def _record(pid: int, out: Path, args_used: list[str]) -> dict[str, Any]:
    """py-spy dumps (10 non-blocking, 2 native), NVML and /proc readings of the trainer, as test fixtures."""
    from dflash_diag.sources import procfs
    from dflash_diag.sources.nvml import NvmlSource
    from dflash_diag.sources.pyspy_find import find_pyspy

    pyspy = find_pyspy()
    if pyspy is None:
        return {"error": "py-spy not found"}
    out.mkdir(parents=True, exist_ok=True)
    nvml, dumps, gpus, proc = NvmlSource(), [], [], []
    for native in [False] * 10 + [True] * 2:
        cmd = [pyspy, "dump", "--pid", str(pid), "--json", "--native" if native else "--nonblocking"]
        t0 = time.monotonic()
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
        if res.returncode == 0:
            dumps.append({"native": native, "seconds": round(time.monotonic() - t0, 4), "args": args_used,
                          "monotonic_s": t0, "dump": json.loads(res.stdout)})
        gpus.append(_jsonable(nvml.sample()))
        proc.append(_jsonable(procfs.read_threads(pid)))
        time.sleep(0.2)
    (out / "pyspy_trainer_gpu.json").write_text(json.dumps(dumps, indent=1) + "\n")
    (out / "nvml_proc_trainer_gpu.json").write_text(json.dumps({"gpus": gpus, "proc": proc}, indent=1) + "\n")
    return {"dumps": len(dumps), "native_dumps": sum(d["native"] for d in dumps), "dir": str(out)}


def _gpu_name() -> str:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "no GPU"
    res = subprocess.run([smi, "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True,
                         check=False)
    return res.stdout.strip().splitlines()[0] if res.returncode == 0 and res.stdout.strip() else "GPU (unknown)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="directory for the results (created)")
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--phase-s", type=float, default=8.0, help="seconds per phase")
    parser.add_argument("--settle-s", type=float, default=1.0, help="pause before each phase, not measured")
    parser.add_argument("--warmup-s", type=float, default=15.0, help="training before the first phase")
    parser.add_argument("--start-timeout-s", type=float, default=300.0)
    parser.add_argument("--no-record", dest="record", action="store_false", help="skip recording the fixtures")
    parser.add_argument("trainer_args", nargs="*", help="extra reference_trainer arguments (after --)")
    args = parser.parse_args()
    if args.rounds < 1 or args.phase_s < 3:
        parser.error("need --rounds >= 1 and --phase-s >= 3")
    args.out.mkdir(parents=True, exist_ok=True)
    t_start = time.monotonic()
    phases: list[dict[str, Any]] = []
    recorded: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="sampling-rate-") as tmp:
        workdir = Path(tmp)
        proc, log = _start_trainer(args, workdir)
        try:
            _wait_steps(proc, log, args.start_timeout_s)
            time.sleep(args.warmup_s)
            for rnd in range(args.rounds):
                shift = rnd % len(CONDITIONS)
                for condition in CONDITIONS[shift:] + CONDITIONS[:shift]:
                    phase = _phase(args, proc, log, rnd, condition, workdir / "boards")
                    phases.append(phase)
                    print(f"round {rnd} {condition:>4}: {phase['tok_s_median'] or 0:,.1f} tok/s "
                          f"{phase.get('samples', '-')} samples at {phase.get('rate_hz', '-')} Hz", file=sys.stderr,
                          flush=True)
            if args.record:
                recorded = _record(proc.pid, args.out / "fixtures",
                                   ["-m", "reference_trainer", "--preset", args.preset])
        finally:
            proc.kill()  # its checkpoint does not matter here; saving a 4B run's state would cost the budget
            proc.wait(timeout=60)
    result = {
        "bench": "sampling_rate",
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "machine": {"host": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version(),
                    "gpu": _gpu_name()},
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "phases": phases,
        "summary": _summary(phases),
        "recorded": recorded,
        "elapsed_s": round(time.monotonic() - t_start, 1),
    }
    (args.out / "sampling_rate.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.out / "sampling_rate.md").write_text(_markdown(result))
    print(_markdown(result))
    print(f"wrote {args.out}/sampling_rate.json, .md ({result['elapsed_s']} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
