"""Probe overhead: the reference trainer with all probes on vs off, alternating in one run; plus the probes'
own micro costs.

    python bench/probe_overhead.py --preset tiny --rounds 5 --max-steps 60            # CPU
    python bench/probe_overhead.py --preset qwen3.5-4b --rounds 5 --max-steps 200     # the H200
    python bench/probe_overhead.py --micro                                            # per-call costs
    python bench/probe_overhead.py --cuda-check --json cuda_check.json                # CUDA-only probes, for real

Each round runs the trainer twice, once with ``--probes all`` and once with ``--probes none``, in ABBA
order (the first mode alternates between rounds, so drift in machine load hits both sides alike). The
figure is the median over rounds of the paired ratio tok/s(all) / tok/s(none), from the trainer's own
``--summary-json``. A table goes to stdout; ``--json PATH`` also writes every run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def run_trainer(python: str, preset: str, probes: str, max_steps: int, extra: list[str], timeout_s: float,
                keep_boards: Path | None = None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="probe-overhead-") as tmp:
        summary = Path(tmp) / "summary.json"
        cmd = [python, "-m", "reference_trainer", "--preset", preset, "--probes", probes, "--max-steps", str(max_steps),
               "--summary-json", str(summary), "--checkpoint-dir", str(Path(tmp) / "ckpt"), "--wandb", "off", *extra]
        if keep_boards is not None and probes != "none":
            # Same probes, started by the `dflash-diag run` bootstrap so the final board is kept for inspection
            # (e.g. the allocator and cudagraphs readings of a real GPU run).
            cmd = [python, "-m", "dflash_diag", "run", "--probes", probes, "--keep-board",
                   "--board-dir", str(keep_boards), "--", *cmd]
        t0 = time.monotonic()
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s)
        wall_s = time.monotonic() - t0
        if proc.returncode != 0 or not summary.exists():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
            raise SystemExit(f"trainer failed (exit {proc.returncode}) with --probes {probes}:\n  " + "\n  ".join(tail))
        data = json.loads(summary.read_text())
    return {"probes": probes, "tokens_per_s": float(data["tokens_per_s"]), "steps": data.get("steps"),
            "elapsed_s": data.get("elapsed_s"), "wall_s": wall_s}


def trainer_benchmark(args: argparse.Namespace) -> dict[str, Any]:
    runs: list[dict[str, Any]] = []
    ratios: list[float] = []
    for r in range(args.rounds):
        order = ("all", "none") if r % 2 == 0 else ("none", "all")
        pair: dict[str, float] = {}
        for mode in order:
            result = run_trainer(args.python, args.preset, mode, args.max_steps, args.trainer_args, args.timeout,
                                 args.keep_boards)
            result["round"] = r
            runs.append(result)
            pair[mode] = result["tokens_per_s"]
            print(f"round {r + 1}/{args.rounds} probes={mode:<4} {result['tokens_per_s']:>12,.1f} tok/s "
                  f"({result['elapsed_s']:.1f} s training, {result['wall_s']:.1f} s wall)", file=sys.stderr, flush=True)
        ratios.append(pair["all"] / pair["none"])
    on = [x["tokens_per_s"] for x in runs if x["probes"] == "all"]
    off = [x["tokens_per_s"] for x in runs if x["probes"] == "none"]
    ratio = statistics.median(ratios)
    return {
        "preset": args.preset,
        "rounds": args.rounds,
        "max_steps": args.max_steps,
        "median_tokens_per_s_all": statistics.median(on),
        "median_tokens_per_s_none": statistics.median(off),
        "median_paired_ratio": ratio,
        "loss_pct": 100.0 * (1.0 - ratio),
        "paired_ratios": ratios,
        "runs": runs,
        "python": sys.version.split()[0],
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "host_cpus": os.cpu_count(),
    }


def print_trainer_table(result: dict[str, Any]) -> None:
    print(f"\nProbe overhead, reference trainer preset {result['preset']}, {result['rounds']} rounds x "
          f"{result['max_steps']} steps, ABBA order")
    print(f"{'probes':<8}{'median tok/s':>16}")
    print(f"{'none':<8}{result['median_tokens_per_s_none']:>16,.1f}")
    print(f"{'all':<8}{result['median_tokens_per_s_all']:>16,.1f}")
    spread = ", ".join(f"{x:.3f}" for x in result["paired_ratios"])
    print(f"median paired ratio all/none: {result['median_paired_ratio']:.4f} "
          f"(loss {result['loss_pct']:+.2f} %); per round: {spread}")


# --- micro costs ----------------------------------------------------------------------------------


def _ns_per_call(fn: Any, n: int) -> float:
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter_ns() - t0) / n)
    return best


def _spin_rate(seconds: float) -> float:
    n = 0
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        s = 0
        for i in range(500):
            s += i
        n += 1
    return n / seconds


def micro_benchmark(rounds: int) -> dict[str, Any]:
    import queue

    import torch
    from torch.utils.checkpoint import checkpoint

    import probes
    from probes import codedrift, gil
    from probes.session import ProbeSession

    out: dict[str, Any] = {"torch": torch.__version__, "python": sys.version.split()[0]}
    with tempfile.TemporaryDirectory() as tmp:
        board_dir = Path(tmp) / "b"
        session = ProbeSession(probes.ProbesConfig(board_dir=str(board_dir)))
        try:
            out["step_ns"] = _ns_per_call(session.step, 100_000)
            plain: queue.Queue[int] = queue.Queue()
            watched = session.watch_queue("q", queue.Queue())

            def pair(q: queue.Queue[int]) -> Any:
                def put_get() -> None:
                    q.put(1)
                    q.get()

                return put_get

            out["queue_put_get_plain_ns"] = _ns_per_call(pair(plain), 50_000)
            out["queue_put_get_watched_ns"] = _ns_per_call(pair(watched), 50_000)
            lin = torch.nn.Linear(16, 16)
            x = torch.randn(4, 16, requires_grad=True)
            out["checkpoint_call_probed_us"] = _ns_per_call(lambda: checkpoint(lin, x, use_reentrant=False), 2_000) / 1e3
            t0 = time.perf_counter()
            for _ in range(20):
                session.publish()
            out["publish_all_probes_ms"] = (time.perf_counter() - t0) / 20 * 1e3
            # The lease check the board thread makes on each wake-up (at most 2 a second) when `doctor --attach`
            # put the probes in: one read of /proc/PID/stat of the command that attached them.
            from dflash_contract import proc
            from probes.session import Lease

            lease = Lease(os.getppid(), proc.start_time_ticks(os.getppid()) or 0, lambda: None)
            session.set_lease(lease)
            out["lease_check_us"] = _ns_per_call(session.check_lease, 20_000) / 1e3
            out["lease_check_cpu_share_at_2hz_pct"] = 100.0 * 2 * out["lease_check_us"] / 1e6
            session.set_lease(None)
            drift = session._slots["codedrift"].probe
            assert isinstance(drift, codedrift.CodedriftProbe)
            costs = [drift.check()["check_cost_ms"] for _ in range(10)]
            out["codedrift_check_ms"] = statistics.median(costs)
            out["codedrift_modules"] = drift.check()["checked_modules"]
        finally:
            session.close()
        plain_checkpoint = _ns_per_call(lambda: checkpoint(lin, x, use_reentrant=False), 2_000) / 1e3
        out["checkpoint_call_plain_us"] = plain_checkpoint
    out.update(_health_micro(torch))

    # Knocker overhead on a pure-Python CPU loop: alternate knocker on/off, median of paired ratios.
    ratios = []
    for r in range(rounds):
        pair_rates: dict[str, float] = {}
        for mode in (("on", "off") if r % 2 == 0 else ("off", "on")):
            probe = gil.GilProbe(gil.Config()) if mode == "on" else None
            try:
                pair_rates[mode] = _spin_rate(0.5)
            finally:
                if probe is not None:
                    probe.close()
        ratios.append(pair_rates["on"] / pair_rates["off"])
    out["knocker_loop_ratio_on_off"] = statistics.median(ratios)
    out["knocker_overhead_pct"] = 100.0 * (1.0 - statistics.median(ratios))
    return out


def _health_micro(torch: Any) -> dict[str, Any]:
    """The health probe's costs: per optimizer step that is not sampled (the hook), per backward (the kept loss),
    and per sample (one a second per optimizer) on a 24-tensor MLP, AdamW, this CPU."""
    from probes.health import Config, HealthProbe

    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(128, 128) for _ in range(12)])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(32, 128)
    out: dict[str, Any] = {}
    probe = HealthProbe(Config(interval_s=0.0))  # every step sampled: the sample's own cost
    try:
        for _ in range(60):
            opt.zero_grad(set_to_none=True)
            model(x).pow(2).mean().backward()
            opt.step()
        out["health_sample_ms_24_tensors"] = statistics.median(probe._cost_ms)
        loss = model(x).pow(2).mean()
        out["health_backward_wrap_ns"] = _ns_per_call(lambda: probe._note_loss(loss), 20_000)
    finally:
        probe.close()
    probe = HealthProbe(Config(interval_s=3600.0))  # sampled once, then never due: the hook's cost per step
    try:
        opt.zero_grad(set_to_none=True)
        model(x).pow(2).mean().backward()
        opt.step()
        out["health_step_hook_ns"] = _ns_per_call(lambda: probe._on_step(opt, (), {}), 50_000)
    finally:
        probe.close()
    return out


def cuda_check() -> dict[str, Any]:
    """The CUDA-only probes on real CUDA work (allocator churn, reduce-overhead graphs in two threads)."""
    import threading

    import torch

    import probes
    from probes.session import ProbeSession

    with tempfile.TemporaryDirectory() as tmp:
        session = ProbeSession(probes.ProbesConfig(enabled=frozenset({"allocator", "cudagraphs", "compile"}),
                                                   board_dir=str(Path(tmp) / "b")))
        try:
            if not torch.cuda.is_available():
                return {"cuda": False, "probes": session.snapshot_probes()}
            dev = torch.device("cuda:0")
            torch.zeros(1, device=dev)  # the probe reads the allocator only once the program initialised CUDA
            session.snapshot_probes()  # baseline for the allocator rates
            for i in range(50):  # churn: varying sizes, empty_cache() every 5th
                x = torch.empty(int(1e6 * (1 + i % 7)), device=dev)
                del x
                if i % 5 == 4:
                    torch.cuda.empty_cache()
            torch.cuda.synchronize()

            def f(x: torch.Tensor) -> torch.Tensor:
                return (x * 2).relu().sum(dim=-1)

            compiled = torch.compile(f, mode="reduce-overhead")
            errors: dict[str, str] = {}

            def work(name: str) -> None:
                try:
                    for _ in range(5):
                        compiled(torch.randn(64, 64, device=dev))
                    torch.cuda.synchronize()
                except Exception as exc:  # torch <= 2.12: CUDAGraph Trees assert in non-main threads
                    errors[name] = f"{type(exc).__name__}: {exc}"[:300]

            work("MainThread")
            t = threading.Thread(target=work, args=("drafter-0",), name="drafter-0")
            t.start()
            t.join(600)
            return {"cuda": True, "torch": torch.__version__, "thread_errors": errors, "probes": session.snapshot_probes()}
        finally:
            session.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="tiny", help="reference trainer preset (tiny on CPU; a real one on GPU)")
    p.add_argument("--rounds", type=int, default=5, help="on/off pairs (default 5)")
    p.add_argument("--max-steps", type=int, default=60, help="trainer steps per run (default 60)")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds allowed per trainer run")
    p.add_argument("--python", default=sys.executable, help="interpreter that runs the trainer")
    p.add_argument("--json", metavar="PATH", help="also write the results (every run) as JSON here")
    p.add_argument("--micro", action="store_true", help="measure the probes' per-call costs instead")
    p.add_argument("--cuda-check", action="store_true",
                   help="run the CUDA-only probes (allocator, cudagraphs) on real CUDA work and print their readings")
    p.add_argument("--keep-boards", type=Path, metavar="DIR",
                   help="run the probed side under `dflash-diag run --keep-board` and keep its final boards in DIR (0700)")
    p.add_argument("trainer_args", nargs="*", help="extra trainer arguments (after --)")
    args = p.parse_args(argv)
    if args.rounds < 1 or args.max_steps < 1:
        p.error("--rounds and --max-steps must be >= 1")
    if args.keep_boards is not None:
        args.keep_boards = args.keep_boards.resolve()
        args.keep_boards.mkdir(mode=0o700, parents=True, exist_ok=True)
    if args.cuda_check:
        result = cuda_check()
        print(json.dumps(result, indent=1))
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=2))
        return 0
    if args.micro:
        result = micro_benchmark(args.rounds)
        width = max(len(k) for k in result)
        for key, value in result.items():
            print(f"{key:<{width}}  {value:.4g}" if isinstance(value, float) else f"{key:<{width}}  {value}")
    else:
        result = trainer_benchmark(args)
        print_trainer_table(result)
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
