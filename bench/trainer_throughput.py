"""Threaded pipeline vs sequential loop, same models, same shapes, alternating in one process.

    python bench/trainer_throughput.py --preset qwen3.5-4b --rounds 3 --steps 20 \
        --modes threaded,threaded-2t,sequential --json out.json

Builds the reference trainer once (target + one drafter on the same device), warms both modes up
(flex_attention compiles, allocator settles), then alternates ``rounds`` times: threaded (target-0 and
drafter-0 threads, each on its own CUDA stream, joined by q_hs) and sequential (target forward then
drafter step in one thread, one stream), ``steps`` drafter steps each, swapping the order every round.
Throughput = real (unpadded) tokens the drafter trained on per second, first step of each window excluded
(the log line at each window's first and last step syncs the device, so the window is exact).

MFU counts *useful* FLOPs per batch against the measured bf16 ceiling (794 TFLOP/s on the H200):
target forward 2*P*S (P = parameters of the layers actually run) plus causal attention 2*S^2*heads*head_dim
per full-attention layer (GatedDeltaNet's recurrent-state math, ~1% of its projections, not counted);
drafter 6*P*Q for its layers (Q = anchors*16 block tokens), 4*|fc|*S for the context projection (no
input grad), 4*H*V*Q for the frozen lm_head (forward + input grad), and flex attention 4*heads*head_dim*Q*K
(K = mean visible keys) times 3.5 for forward+backward. Activation-checkpoint recompute is not counted.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from reference_trainer.build import Built, build
from reference_trainer.checkpoint import Resume
from reference_trainer.cli import parse_args
from reference_trainer.train import Run

BF16_PEAK_FLOPS = 794e12  # measured: 8192^3 bf16 matmul on the H200 (docs/benchmarks.md)


def flops_per_batch(built: Built) -> float:
    cfg = built.config
    target = next(iter(built.targets.values())).model
    batch, seq = cfg.data.batch_size, cfg.data.seq_len
    tokens = batch * seq
    layer_params = sum(p.numel() for p in target.layers.parameters())
    full_attn_layers = sum(1 for layer in target.layers if hasattr(layer, "self_attn"))
    t = cfg.target
    target_flops = 2.0 * layer_params * tokens + full_attn_layers * 2.0 * batch * seq**2 * (
        t.num_attention_heads * t.head_dim)
    drafter = built.replicas[0].model
    d = cfg.drafter
    q_len = cfg.objective.num_anchors * cfg.objective.block_size
    draft_layer_params = sum(p.numel() for p in drafter.layers.parameters())
    mean_visible = (cfg.data.min_seq_len + seq) / 4 + cfg.objective.block_size  # anchors uniform over the length
    drafter_flops = batch * (
        6.0 * draft_layer_params * q_len
        + 4.0 * drafter.fc.weight.numel() * seq
        + 4.0 * d.hidden_size * d.vocab_size * q_len
        + 3.5 * 4.0 * d.num_attention_heads * d.head_dim * q_len * mean_visible * d.num_hidden_layers
    )
    return target_flops + drafter_flops


MODES = ("threaded", "threaded-2t", "sequential")


def run_window(built: Built, start: Resume, mode: str, steps: int) -> tuple[dict[str, Any], Resume]:
    """One measured window, a fresh ``Run`` on the same models continuing from ``start``. threaded: target-0 +
    drafter-0; threaded-2t: two target threads sharing the one frozen target (the same device twice);
    sequential: no threads. A ``/log1`` suffix logs every step, i.e. one loss.item() host sync per step, as
    most training loops do."""
    mode, _, suffix = mode.partition("/")
    log_interval = 1 if suffix == "log1" else 1000
    device = built.config.drafter_devices[0]
    targets = (device, device) if mode == "threaded-2t" else (device,)
    config = dataclasses.replace(built.config, max_steps=start.step + steps, target_devices=targets,
                                 log_interval=log_interval)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    run = Run(built, sequential=mode == "sequential", config=config, start=start, save_at_end=False)
    rc = run.run()
    if rc != 0:
        raise SystemExit(f"trainer run failed (exit {rc})")
    ledger = run.ledger.state()
    return run.summary(), Resume(step=run.step, cursor=ledger["cursor"], consumed_ahead=tuple(ledger["consumed_ahead"]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="auto")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20, help="drafter steps per window")
    parser.add_argument("--warmup-steps", type=int, default=6)
    parser.add_argument("--queue-size", type=int, default=2)
    parser.add_argument("--modes", default="threaded,sequential",
                        help=f"comma list of {', '.join(MODES)}, each optionally with /log1 (log, i.e. sync, "
                        "every step); alternated, order rotated every round")
    parser.add_argument("--json", help="write all windows and the medians here")
    args, extra = parser.parse_known_args()
    with tempfile.TemporaryDirectory() as tmp:
        config, _ = parse_args(["--preset", args.preset, "--wandb", "off", "--probes", "none",
                                "--queue-size", str(args.queue_size), "--log-interval", "1000",
                                "--checkpoint-dir", tmp, *extra])
        build_start = time.monotonic()
        built = build(config)
        start = built.resume
        print(f"built in {time.monotonic() - build_start:.1f} s; {built.kernels.line()}; attention "
              f"{built.attention}", flush=True)
        modes = [m.strip() for m in args.modes.split(",") if m.strip()]
        if not modes or {m.split("/")[0] for m in modes} - set(MODES) or "sequential" not in modes:
            parser.error(f"--modes: choose from {', '.join(MODES)}, including sequential")
        for mode in modes:
            _, start = run_window(built, start, mode, args.warmup_steps)
        windows: list[dict[str, Any]] = []
        for round_index in range(args.rounds):
            shift = round_index % len(modes)
            for mode in modes[shift:] + modes[:shift]:
                summary, start = run_window(built, start, mode, args.steps)
                summary["mode"] = mode
                windows.append(summary)
                print(f"round {round_index} {summary['mode']:>10}: {summary['tokens_per_s']:10,.0f} tok/s, "
                      f"{summary['drafter_batches_per_s']:.2f} b/s, q_hs mean {summary['queue_depth_mean']:.2f}",
                      flush=True)
    flops = flops_per_batch(built)
    on_cuda = built.replicas[0].device.type == "cuda"
    result: dict[str, Any] = {"preset": config.preset, "device": torch.cuda.get_device_name(0) if on_cuda else "cpu",
                              "torch": torch.__version__, "gdn_kernel": built.kernels.chunk_gated_delta_rule,
                              "attention": built.attention, "steps_per_window": args.steps,
                              "rounds": args.rounds, "flops_per_batch": flops, "windows": windows}
    for mode in modes:
        rows = [w for w in windows if w["mode"] == mode]
        tok = statistics.median(w["tokens_per_s"] for w in rows)
        bps = statistics.median(w["drafter_batches_per_s"] for w in rows)
        result[mode] = {"tokens_per_s_median": tok, "batches_per_s_median": bps,
                        "mfu_pct": 100.0 * flops * bps / BF16_PEAK_FLOPS if on_cuda else None}
    for mode in modes:
        base, _, suffix = mode.partition("/")
        baseline = "sequential" + (f"/{suffix}" if suffix else "")
        if base != "sequential" and baseline in result:
            result[f"ratio_{mode}_over_{baseline}"] = (result[mode]["tokens_per_s_median"]
                                                       / result[baseline]["tokens_per_s_median"])
    for mode in modes:
        r = result[mode]
        mfu = f"{r['mfu_pct']:.1f}%" if r["mfu_pct"] is not None else "N/A (no CUDA)"
        print(f"{mode:>10}: median {r['tokens_per_s_median']:,.0f} tok/s, {r['batches_per_s_median']:.2f} batches/s, "
              f"MFU {mfu}")
    for key, value in result.items():
        if key.startswith("ratio_"):
            print(f"{key}: {value:.3f}")
    print(f"{flops / 1e12:.2f} TFLOP of useful work counted per batch")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
