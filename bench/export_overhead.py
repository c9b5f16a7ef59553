"""What logging the probes' readings into wandb costs a training run: wandb logging on vs off, alternating.

    python bench/export_overhead.py --preset tiny --rounds 4 --steps 60 --json out.json        # CPU
    python bench/export_overhead.py --preset qwen3.5-4b --rounds 3 --steps 12                  # the H200

Builds the reference trainer once (all probes on, its own wandb offline in a temporary WANDB_DIR, a log line
every 2 steps as most loops do), then alternates windows of ``--steps`` drafter steps in three modes, the
order rotated every round: ``off`` (probes on, readings not sent to wandb), ``on`` (the default: a wandb log
at most every 2 s) and ``on-fast`` (every 0.25 s: eight times the default, to make the cost visible). Every
window starts a fresh probe session and a fresh offline wandb run (outside the timed window). Figures:
median tok/s per mode, the paired ratio on/off per round (median), and the measured cost of one wandb log
on the board thread (``session.wandb.log_cost_ms_mean``). Also times ``WandbLogger.maybe_log`` alone
against a real offline run (``--micro-logs`` calls).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MODES = {"off": None, "on": 2.0, "on-fast": 0.25}
# A board with every probe reporting, one queue and one CUDA device (docs/board.md's examples).
EXAMPLE_BOARD: dict[str, Any] = {"session": {"steps": 120, "step": 120, "publish_cost_ms_mean": 4.3, "publish_errors": 0},
                                 "probes": {
    "queues": {"status": "ok", "q_hs": {"depth": 3, "maxsize": 4, "put_blocked_share": 0.6, "get_blocked_share": 0.0,
                                        "puts_per_s": 3.3, "gets_per_s": 3.3}},
    "gil": {"status": "ok", "wait_mean_ms": 0.4, "wait_p99_ms": 2.0, "contention_share": 0.05},
    "compile": {"status": "ok", "compiles": 9, "recompiles": 3, "graph_breaks": 2, "recompile_limit_hits": 0,
                "failed_compiles": 0, "compile_time_s": 30.8, "compiling_now": False},
    "cudagraphs": {"status": "ok", "captures": 2, "skips": 0, "rerecords": 0, "replays": 100},
    "allocator": {"status": "ok", "empty_cache_calls": 0, "devices": {"0": {
        "device_alloc_per_s": 3.1, "device_free_per_s": 2.9, "alloc_retries": 0, "ooms": 0, "allocated_bytes": 2**34,
        "reserved_bytes": 2**35, "reserved_swing_bytes": 2**28, "fragmentation_share": 0.1}}},
    "checkpoint": {"status": "ok", "calls": {"reentrant": 0, "non_reentrant": 96}, "grad_none_count": 0,
                   "trainable_params": 58, "mixed_modes": False},
    "fastpath": {"status": "ok", "fallback": False},
    "codedrift": {"status": "ok", "stale_count": 0},
}}


def _window(built: Any, start: Any, mode: str, steps: int) -> tuple[dict[str, Any], Any]:
    """One window: a fresh ``Run`` (fresh probe session, fresh offline wandb run) on the built models."""
    import probes
    from reference_trainer.checkpoint import Resume
    from reference_trainer.train import Run

    interval = MODES[mode]
    probes._session = None  # each run closes its session; the next window gets a fresh one
    config = dataclasses.replace(built.config, max_steps=start.step + steps)
    run = Run(built, config=config, start=start, save_at_end=False)
    run.session.log_to_wandb(interval is not None)
    if interval is not None and run.session._wandb is not None:
        run.session._wandb.interval_s = interval
    rc = run.run()
    if rc != 0:
        raise SystemExit(f"trainer run failed (exit {rc})")
    summary = run.summary()
    status = run.session._wandb.status() if run.session._wandb is not None else {}
    ledger = run.ledger.state()
    after = Resume(step=run.step, cursor=ledger["cursor"], consumed_ahead=tuple(ledger["consumed_ahead"]))
    return ({"mode": mode, "tokens_per_s": summary["tokens_per_s"], "steps": steps,
             "wandb_logs": status.get("logs", 0), "wandb_errors": status.get("errors", 0),
             "log_cost_ms_mean": status.get("log_cost_ms_mean")}, after)


def micro_logs(calls: int, wandb_dir: str) -> dict[str, Any]:
    """One ``maybe_log`` (readings of a full board into a real offline run), timed alone."""
    import wandb

    from probes.wandb_log import WandbLogger

    board = EXAMPLE_BOARD
    run = wandb.init(project="dflash-export-overhead", mode="offline", dir=wandb_dir,
                     settings=wandb.Settings(console="off"))
    try:
        run.log({"loss": 1.0})  # the program has logged: the logger may log
        logger = WandbLogger(interval_s=1e-9)
        costs = []
        for _ in range(calls):
            t0 = time.perf_counter()
            logger.maybe_log(board, force=True)
            costs.append(time.perf_counter() - t0)
        return {"calls": calls, "median_ms": 1e3 * statistics.median(costs), "errors": logger.errors,
                "metrics_per_log": len(board_metrics(board))}
    finally:
        run.finish()


def board_metrics(board: dict[str, Any]) -> dict[str, float]:
    from dflash_contract.readings import wandb_metrics

    return wandb_metrics(board["probes"], board.get("session"))


def measure(preset: str, rounds: int, steps: int, warmup_steps: int, micro_calls: int, extra: list[str]) -> dict[str, Any]:
    import torch

    from reference_trainer.build import build
    from reference_trainer.cli import parse_args

    with tempfile.TemporaryDirectory(prefix="export-overhead-") as tmp:
        os.environ.setdefault("WANDB_SILENT", "true")
        os.environ["WANDB_DIR"] = tmp
        os.environ.pop("WANDB_API_KEY", None)
        config, _ = parse_args(["--preset", preset, "--wandb", "offline", "--probes", "all", "--log-interval", "2",
                                "--checkpoint-dir", tmp, *extra])
        t0 = time.monotonic()
        built = build(config)
        start = built.resume
        print(f"built {preset} in {time.monotonic() - t0:.1f} s", flush=True)
        modes = list(MODES)
        for mode in modes:
            _, start = _window(built, start, mode, warmup_steps)
        windows: list[dict[str, Any]] = []
        for r in range(rounds):
            shift = r % len(modes)
            for mode in modes[shift:] + modes[:shift]:
                w, start = _window(built, start, mode, steps)
                w["round"] = r
                windows.append(w)
                print(f"round {r} {mode:>8}: {w['tokens_per_s']:10,.0f} tok/s, {w['wandb_logs']} wandb logs"
                      + (f" ({w['log_cost_ms_mean']:.2f} ms each)" if w["log_cost_ms_mean"] else ""), flush=True)
        micro = micro_logs(micro_calls, tmp) if micro_calls else None
    result: dict[str, Any] = {"preset": preset, "torch": torch.__version__,
                              "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
                              "rounds": rounds, "steps_per_window": steps, "windows": windows, "micro": micro}
    for mode in modes:
        rows = [w for w in windows if w["mode"] == mode]
        costs = [w["log_cost_ms_mean"] for w in rows if w["log_cost_ms_mean"]]
        result[mode] = {"tokens_per_s_median": statistics.median(w["tokens_per_s"] for w in rows),
                        "wandb_logs_per_window": statistics.median(w["wandb_logs"] for w in rows),
                        "log_cost_ms_median": statistics.median(costs) if costs else None,
                        "wandb_errors": sum(w["wandb_errors"] for w in rows)}
    for mode in ("on", "on-fast"):
        ratios = []
        for r in range(rounds):
            on = next(w for w in windows if w["round"] == r and w["mode"] == mode)
            off = next(w for w in windows if w["round"] == r and w["mode"] == "off")
            ratios.append(on["tokens_per_s"] / off["tokens_per_s"])
        result[f"ratio_{mode}_over_off"] = statistics.median(ratios)
        result[f"ratios_{mode}_over_off"] = ratios
    return result


def table(result: dict[str, Any]) -> str:
    lines = ["| mode | median tok/s | wandb logs per window | cost of one log (board thread) | ratio vs off (median of rounds) |",
             "|---|---|---|---|---|"]
    for mode in MODES:
        r = result[mode]
        ratio = "1" if mode == "off" else f"**{result[f'ratio_{mode}_over_off']:.3f}**"
        cost = f"{r['log_cost_ms_median']:.2f} ms" if r["log_cost_ms_median"] else "-"
        lines.append(f"| {mode} | {r['tokens_per_s_median']:,.0f} | {r['wandb_logs_per_window']:g} | {cost} | {ratio} |")
    if result.get("micro"):
        m = result["micro"]
        lines.append("")
        lines.append(f"One `maybe_log` alone ({m['metrics_per_log']} readings into an offline run): "
                     f"{m['median_ms']:.2f} ms median of {m['calls']} calls.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="tiny")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--steps", type=int, default=60, help="drafter steps per window")
    p.add_argument("--warmup-steps", type=int, default=6)
    p.add_argument("--micro-logs", type=int, default=200, help="maybe_log calls timed alone (0: skip)")
    p.add_argument("--json", metavar="PATH")
    args, extra = p.parse_known_args(argv)
    result = measure(args.preset, args.rounds, args.steps, args.warmup_steps, args.micro_logs, extra)
    print(table(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
