"""What each piece of GPU-side evidence costs a running program, measured in one run (bounded: ~4 minutes on a GPU).

1. **syncs** (the ``syncs`` probe: torch's sync debug mode + one targeted warnings filter): a ``.item()`` loop,
   microseconds per iteration without and with the probe armed, alternating rounds; and whether it counted every
   sync. Without CUDA the probe never arms (nothing to measure: said so), and the warning path it takes per sync is
   measured on its own instead (``cpu_warning_path_us``: an upper bound of the hook's Python cost on this CPU).
2. **allocator**: one ``torch.cuda.memory_stats()`` and one allocator-probe snapshot, in microseconds; and what its
   vocabulary-projection window (a global module forward hook, open 0.5 s every 2 minutes) adds per module call.
3. **gpm** (NVML GPM): the metrics over windows of 0.06, 0.3, 0.7 and 1.0 s under a bf16 matmul load (tensor
   cores) and an fp32 load with TF32 off (the FP32 pipe), and what a begin + end costs beyond the window.
4. **kernel window**: a child process trains (matmuls, a burst of tiny kernels whose launches are timed on the host,
   one sync per step). Rounds of: a window *before*, ``dflash-diag record --kernels PID --duration D`` (*during*),
   a window *after*, alternating; step time and host microseconds per kernel launch in each window. *after* against
   *before* says whether the profiler leaves a cost behind once taken out (CUPTI's callbacks lingering would tax
   every later launch); the spread of *before* over the rounds is the noise to judge it by.
5. **answer time**: ``dflash-diag doctor PID --kernel-window`` on the child, wall seconds (the goal: <= 10 s).

Writes ``gpu_evidence_cost.json`` and ``gpu_evidence_cost.md`` to ``--out``; the machine is named in both. CPU-safe:
on a box without CUDA every GPU piece says N/A and why, and the kernel-window rounds run the same child on CPU
(the profiler records CPU ops only: the plumbing, not the GPU's figures).

  .venv/bin/python bench/gpu_evidence_cost.py --out /tmp/gec-cpu --rounds 2 --window-s 4   # CPU plumbing
  python bench/gpu_evidence_cost.py --out /tmp/gec-h200                                    # on the H200
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# The child: a training-like loop; per step it prints `step <mono_s> <step_ms> <launch_us>` (launch_us: host time per
# tiny-kernel launch in a burst, no sync inside the burst; the step ends with one sync so the step time is the GPU's).
CHILD = r"""
import os, sys, time, threading, torch
device = sys.argv[1]
torch.set_num_threads(2)
torch.manual_seed(0)
big = torch.randn(2048 if device == "cuda" else 256, 2048 if device == "cuda" else 256, device=device)
w = torch.randn_like(big, requires_grad=True)
tiny = torch.zeros(8, device=device)
opt = torch.optim.SGD([w], lr=1e-6)
sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
def train():
    while True:
        t0 = time.perf_counter()
        loss = (big @ w).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        l0 = time.perf_counter()
        for _ in range(200):
            tiny.add_(1.0)
        launch_us = (time.perf_counter() - l0) / 200 * 1e6
        sync()
        print(f"step {time.monotonic():.6f} {(time.perf_counter() - t0) * 1e3:.4f} {launch_us:.4f}", flush=True)
t = threading.Thread(target=train, name="trainer", daemon=True)
t.start()
print("ready", os.getpid(), flush=True)
t.join()
"""


def machine() -> dict[str, Any]:
    import torch

    out: dict[str, Any] = {"host": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version(),
                           "torch": torch.__version__, "cuda": torch.cuda.is_available()}
    if torch.cuda.is_available():
        out["gpu"] = torch.cuda.get_device_name(0)
    return out


# --- 1. syncs -----------------------------------------------------------------------------------------------------


def bench_syncs(rounds: int, iters: int) -> dict[str, Any]:
    import torch

    from probes.syncs import SYNC_MESSAGE, Config, SyncsProbe

    if not torch.cuda.is_available():
        return {"status": "N/A: no CUDA (the probe never arms without it)", "cpu_warning_path_us": _warning_path_us()}
    x = torch.ones((), device="cuda")
    torch.cuda.synchronize()

    def loop() -> float:
        t0 = time.perf_counter()
        for _ in range(iters):
            (x + 1).item()
        return (time.perf_counter() - t0) / iters * 1e6

    loop()  # warm-up
    plain, counted, totals = [], [], []
    for _ in range(rounds):
        plain.append(loop())
        probe = SyncsProbe(Config())
        payload = probe.snapshot(0.0)
        if payload.get("status") != "ok":
            probe.close()
            return {"status": f"N/A: the probe did not arm: {payload.get('reason')}"}
        counted.append(loop())
        totals.append(probe.snapshot(1.0)["total"])
        probe.close()
    del SYNC_MESSAGE
    return {"status": "ok", "iters": iters, "plain_us_per_iter": plain, "counted_us_per_iter": counted,
            "cost_us_per_sync": statistics.median(c - p for c, p in zip(counted, plain, strict=True)),
            "counted_every_sync": all(t == iters for t in totals), "totals": totals}


def _warning_path_us(n: int = 20000) -> float:
    """The Python side of one counted sync on this machine: a warning through a targeted 'always' filter into a
    counting showwarning (what the probe's hook does per sync)."""
    from probes.syncs import SYNC_MESSAGE

    count = [0]
    with warnings.catch_warnings():
        warnings.filterwarnings("always", message=SYNC_MESSAGE, category=UserWarning)
        warnings.showwarning = lambda *a, **k: count.__setitem__(0, count[0] + 1)
        t0 = time.perf_counter()
        for _ in range(n):
            warnings.warn(SYNC_MESSAGE, UserWarning, stacklevel=1)
        elapsed = time.perf_counter() - t0
    assert count[0] == n
    return round(elapsed / n * 1e6, 3)


# --- 2. allocator ---------------------------------------------------------------------------------------------------


def bench_vocab_window(rounds: int, calls: int = 2000) -> dict[str, Any]:
    """The allocator probe's discovery window (a global forward hook): µs added per module call while it is open,
    on a stack of small Linear layers (the hook's cost per module; the window is open 0.5 s every 2 minutes)."""
    import torch
    from torch import nn

    from probes._vocab import VocabWatch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    layers = nn.Sequential(*[nn.Linear(16, 16) for _ in range(20)]).to(device)
    x = torch.randn(4, 16, device=device)

    def loop() -> float:
        t0 = time.perf_counter()
        with torch.no_grad():
            for _ in range(calls // 20):
                layers(x)
        return (time.perf_counter() - t0) / calls * 1e6

    loop()
    plain, hooked = [], []
    for _ in range(rounds):
        plain.append(loop())
        watch = VocabWatch(window_s=3600.0, every_s=3600.0)
        watch.tick(torch, now_s=0.0)
        hooked.append(loop())
        watch.close()
    return {"device": device, "plain_us_per_module_call": plain, "window_open_us_per_module_call": hooked,
            "cost_us_per_module_call": round(statistics.median(h - p for h, p in zip(hooked, plain, strict=True)), 3)}


def bench_allocator(n: int = 200) -> dict[str, Any]:
    import torch

    from probes.allocator import AllocatorProbe, Config

    if not torch.cuda.is_available():
        return {"status": "N/A: no CUDA"}
    torch.ones(1, device="cuda")
    t0 = time.perf_counter()
    for _ in range(n):
        torch.cuda.memory_stats(0)
    stats_us = (time.perf_counter() - t0) / n * 1e6
    probe = AllocatorProbe(Config())
    t0 = time.perf_counter()
    for _ in range(n):
        probe.snapshot(0.0)
    snapshot_us = (time.perf_counter() - t0) / n * 1e6
    probe.close()
    return {"status": "ok", "memory_stats_us": round(stats_us, 2), "probe_snapshot_us": round(snapshot_us, 2)}


# --- 3. NVML GPM ----------------------------------------------------------------------------------------------------


def bench_gpm(windows: tuple[float, ...] = (0.06, 0.3, 0.7, 1.0)) -> dict[str, Any]:
    import torch

    from dflash_diag.model import NA
    from dflash_diag.sources.nvml import NvmlSource

    source = NvmlSource()
    first = source.gpm_begin()
    if isinstance(first, NA):
        return {"status": f"N/A: {first.reason}"}
    source.gpm_end(first)
    if not torch.cuda.is_available():
        return {"status": "N/A: no CUDA to load the GPU with"}
    out: dict[str, Any] = {"status": "ok", "loads": {}}
    for load, dtype, tf32 in (("bf16 matmul", torch.bfloat16, False), ("fp32 matmul, TF32 off", torch.float32, False)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        stop = threading.Event()
        worker = threading.Thread(target=_matmul_load, args=(dtype, stop), daemon=True)
        worker.start()
        time.sleep(1.0)  # the load reaches its pace
        rows = []
        for window_s in windows:
            t0 = time.perf_counter()
            began = source.gpm_begin()
            begin_ms = (time.perf_counter() - t0) * 1e3
            time.sleep(window_s)
            t1 = time.perf_counter()
            readings = source.gpm_end(began) if not isinstance(began, NA) else ()
            end_ms = (time.perf_counter() - t1) * 1e3
            reading = readings[0] if readings else None
            rows.append({"window_s": window_s, "begin_ms": round(begin_ms, 3), "end_ms": round(end_ms, 3),
                         "metrics": {k: (v.reason if isinstance(v, NA) else round(v, 1))
                                     for k, v in _fields(reading).items()}})
        stop.set()
        worker.join()
        out["loads"][load] = rows
    source.close()
    return out


def _matmul_load(dtype: Any, stop: threading.Event) -> None:
    import torch

    a = torch.randn(8192, 8192, device="cuda", dtype=dtype)
    while not stop.is_set():
        for _ in range(4):
            a @ a
        torch.cuda.synchronize()


def _fields(reading: Any) -> dict[str, Any]:
    from dflash_diag.model import GPM_FIELDS

    return {} if reading is None else {name: getattr(reading, name) for name in GPM_FIELDS}


# --- 4./5. the kernel window: residual cost after it, and doctor's answer time --------------------------------------


class Child:
    """The training child and its per-step lines, read on a thread: (monotonic s, step ms, launch µs)."""

    def __init__(self, device: str, board_dir: Path) -> None:
        env = dict(os.environ, DFLASH_DIAG_BOARD_DIR=str(board_dir), PYTHONPATH=str(ROOT))
        self.proc = subprocess.Popen([sys.executable, "-c", CHILD, device], stdout=subprocess.PIPE, text=True,
                                     stderr=subprocess.DEVNULL, env=env, start_new_session=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("ready"):
            raise RuntimeError(f"the child did not start: {line!r}")
        self.steps: list[tuple[float, float, float]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            parts = line.split()
            if len(parts) == 4 and parts[0] == "step":
                self.steps.append((float(parts[1]), float(parts[2]), float(parts[3])))

    def window(self, start_s: float, end_s: float) -> dict[str, Any]:
        rows = [s for s in list(self.steps) if start_s <= s[0] <= end_s]
        if not rows:
            return {"steps": 0}
        return {"steps": len(rows), "steps_per_s": round(len(rows) / (end_s - start_s), 2),
                "step_ms_median": round(statistics.median(r[1] for r in rows), 4),
                "launch_us_median": round(statistics.median(r[2] for r in rows), 4)}

    def stop(self) -> None:
        try:
            os.killpg(self.proc.pid, 9)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=30)


def _cli(*args: str, timeout_s: float = 180.0) -> tuple[int, float, str]:
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "dflash_diag", *args], capture_output=True, text=True,
                          timeout=timeout_s, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    return done.returncode, time.monotonic() - t0, done.stdout if done.returncode == 0 else done.stderr[-800:]


def bench_kernel_window(rounds: int, window_s: float, record_s: float, warmup_s: float) -> dict[str, Any]:
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    board_dir = Path(tempfile.mkdtemp(prefix="gec-boards-"))
    os.chmod(board_dir, 0o700)
    child = Child(device, board_dir)
    out: dict[str, Any] = {"device": device, "window_s": window_s, "record_s": record_s, "rounds": []}
    try:
        time.sleep(warmup_s)
        for i in range(rounds):
            row: dict[str, Any] = {}
            t0 = time.monotonic()
            time.sleep(window_s)
            row["before"] = child.window(t0, time.monotonic())
            trace = board_dir / f"round{i}.trace.json"
            t1 = time.monotonic()
            code, seconds, said = _cli("record", "--kernels", str(child.proc.pid), "--duration", f"{record_s:g}",
                                       "--board-dir", str(board_dir), "-o", str(trace), "--json", "--force")
            row["during"] = {**child.window(t1, time.monotonic()), "command_s": round(seconds, 2), "rc": code}
            if code == 0:
                info = json.loads(said)
                row["during"].update(profiled_s=info.get("profiled_s"), stop_ms=info.get("stop_ms"),
                                     export_ms=info.get("export_ms"), gpu_spans=info.get("gpu_spans"))
            else:
                row["during"]["error"] = said
            t2 = time.monotonic()
            time.sleep(window_s)
            row["after"] = child.window(t2, time.monotonic())
            out["rounds"].append(row)
        out["summary"] = _residual(out["rounds"])
        code, seconds, said = _cli("doctor", str(child.proc.pid), "--kernel-window", "--board-dir", str(board_dir),
                                   "--json")
        out["answer"] = {"rc": code, "seconds": round(seconds, 2), "goal_s": 10.0,
                         "kernel_window": json.loads(said).get("kernel_window") if code == 0 else said}
    finally:
        child.stop()
    return out


def _residual(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """after/before per round (step time and launch µs), and how much before varies between rounds (the noise)."""
    def ratios(key: str, a: str, b: str) -> list[float]:
        return [round(r[b][key] / r[a][key], 4) for r in rounds if r[a].get(key) and r[b].get(key)]

    befores = [r["before"]["step_ms_median"] for r in rounds if r["before"].get("step_ms_median")]
    launches = [r["before"]["launch_us_median"] for r in rounds if r["before"].get("launch_us_median")]
    return {
        "step_ms_after_over_before": ratios("step_ms_median", "before", "after"),
        "launch_us_after_over_before": ratios("launch_us_median", "before", "after"),
        "step_ms_during_over_before": ratios("step_ms_median", "before", "during"),
        "launch_us_during_over_before": ratios("launch_us_median", "before", "during"),
        "before_step_ms_spread": round(max(befores) / min(befores), 4) if befores else None,
        "before_launch_us_spread": round(max(launches) / min(launches), 4) if launches else None,
    }


# --- the report ----------------------------------------------------------------------------------------------------


def markdown(result: dict[str, Any]) -> str:
    m = result["machine"]
    lines = [f"# GPU evidence costs ({m.get('gpu') or 'no GPU'}; {m['host']}, {m['cpus']} CPUs, torch {m['torch']})",
             "", f"`{' '.join(result['argv'])}`", ""]
    syncs = result["syncs"]
    if syncs.get("status") == "ok":
        lines.append(f"- syncs probe: {syncs['cost_us_per_sync']:+.2f} µs per `.item()` (plain "
                     f"{statistics.median(syncs['plain_us_per_iter']):.2f} µs/iter), every sync counted: "
                     f"{syncs['counted_every_sync']}")
    else:
        lines.append(f"- syncs probe: {syncs['status']}; the warning path alone: {syncs.get('cpu_warning_path_us')} µs")
    alloc = result["allocator"]
    lines.append(f"- allocator: {alloc['status']}" if alloc.get("status") != "ok" else
                 f"- allocator: memory_stats {alloc['memory_stats_us']} µs, probe snapshot {alloc['probe_snapshot_us']} µs")
    vocab = result.get("vocab_window")
    if vocab:
        lines.append(f"- allocator probe's vocabulary window ({vocab['device']}): "
                     f"{vocab['cost_us_per_module_call']:+.3f} µs per module call while open (0.5 s every 2 min)")
    gpm = result["gpm"]
    if gpm.get("status") != "ok":
        lines.append(f"- NVML GPM: {gpm['status']}")
    else:
        for load, rows in gpm["loads"].items():
            for row in rows:
                lines.append(f"- GPM, {load}, {row['window_s']} s window (begin {row['begin_ms']} ms, end "
                             f"{row['end_ms']} ms): {row['metrics']}")
    kw = result["kernel_window"]
    lines += ["", f"Kernel window ({kw['device']}): {len(kw['rounds'])} rounds of {kw['window_s']} s before, "
              f"`record --kernels --duration {kw['record_s']}`, {kw['window_s']} s after", "",
              "| round | before step ms | during step ms | after step ms | before launch µs | after launch µs |",
              "|---|---|---|---|---|---|"]
    for i, r in enumerate(kw["rounds"]):
        lines.append(f"| {i} | {r['before'].get('step_ms_median')} | {r['during'].get('step_ms_median')} | "
                     f"{r['after'].get('step_ms_median')} | {r['before'].get('launch_us_median')} | "
                     f"{r['after'].get('launch_us_median')} |")
    lines += ["", f"summary: `{json.dumps(kw.get('summary'))}`",
              f"doctor --kernel-window answered in {kw.get('answer', {}).get('seconds')} s (goal 10 s)"]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (syncs and kernel window)")
    parser.add_argument("--iters", type=int, default=10000, help=".item() calls per syncs round")
    parser.add_argument("--window-s", type=float, default=8.0, help="the before and after windows")
    parser.add_argument("--record-s", type=float, default=5.0, help="how long the profiler records")
    parser.add_argument("--warmup-s", type=float, default=15.0, help="the child's warm-up before the first round")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    result = {"argv": ["python", "bench/gpu_evidence_cost.py", *sys.argv[1:]], "machine": machine(),
              "syncs": bench_syncs(args.rounds, args.iters), "allocator": bench_allocator(),
              "vocab_window": bench_vocab_window(args.rounds), "gpm": bench_gpm(),
              "kernel_window": bench_kernel_window(args.rounds, args.window_s, args.record_s, args.warmup_s)}
    (args.out / "gpu_evidence_cost.json").write_text(json.dumps(result, indent=1) + "\n")
    text = markdown(result)
    (args.out / "gpu_evidence_cost.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
