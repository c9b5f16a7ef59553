"""``python -m reference_trainer``: the command line, turned into a validated ``TrainConfig``, then a run.

Every user mistake is one line on stderr and an exit code from ``errors.ExitCode``, never a traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import warnings
from typing import Any

import torch

from reference_trainer import ddp, scenarios
from reference_trainer.config import PRESETS, TrainConfig, preset_fields, resolve_preset
from reference_trainer.data import DataError
from reference_trainer.errors import ExitCode, UserError
from reference_trainer.graphs import MODES, GraphConfig
from reference_trainer.loss import LOSSES, MASK_BUILDS
from reference_trainer.target import TargetLoadError

PROG = "python -m reference_trainer"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, not argparse's usage + error pair
        raise UserError(f"{message} (see {PROG} --help)", ExitCode.USAGE)


def _bool(text: str) -> bool:
    if text.lower() in ("true", "1", "yes", "on"):
        return True
    if text.lower() in ("false", "0", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _devices(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="The reference threaded DFlash drafter trainer: target threads push the "
                "hidden states of a frozen Qwen3.5-style target into a bounded queue q_hs; drafter threads "
                "train one DFlash block-diffusion drafter from it.",
                epilog="Docs: docs/trainer.md. Example: python -m reference_trainer --preset tiny --max-steps 200")
    g = p.add_argument_group("model and data")
    g.add_argument("--preset", default="auto", help=f"auto (qwen3.5-4b on CUDA, else tiny), {', '.join(PRESETS)}")
    g.add_argument("--target-path", help="local Qwen3.5 checkpoint dir (config.json + safetensors); "
                   "default: random init from the preset")
    g.add_argument("--data", help="JSONL of {\"input_ids\": [...], \"loss_mask\": [...]} lines; "
                   "default: the seeded synthetic stream")
    g.add_argument("--seq-len", type=int, help="pad/truncate sequences to this length (preset default)")
    g.add_argument("--batch-size", type=int, help="sequences per q_hs batch (preset default)")
    g.add_argument("--num-anchors", type=int, help="anchors (blocks) per sequence (preset default)")
    g.add_argument("--seed", type=int, default=0)
    g = p.add_argument_group("pipeline")
    g.add_argument("--target-devices", type=_devices, help="comma list, one target thread each (default: "
                   "cuda:0 with CUDA, else cpu)")
    g.add_argument("--drafter-devices", type=_devices, help="comma list, one drafter thread (replica) each")
    g.add_argument("--queue-size", type=int, help="bound of q_hs, in batches (preset default)")
    g.add_argument("--cpu-threads", type=int, default=1,
                   help="torch intra-op threads (default 1: the trainer's own threads are the parallelism; "
                   "OpenMP teams per thread oversubscribe the cores and stall on a busy machine)")
    g.add_argument("--ddp", action="store_true",
                   help="one process per rank, launched by torchrun: the drafters of all ranks stay in sync (one "
                   "gradient all_reduce per step; gloo on CPU, NCCL on GPU), each rank reads its own batches, "
                   "rank 0 logs, checkpoints and writes the summary (default device: cuda:LOCAL_RANK with CUDA)")
    g.add_argument("--sequential", action="store_true",
                   help="no threads: target forward then drafter step in the main thread (the baseline)")
    g = p.add_argument_group("optimisation")
    g.add_argument("--lr", type=float, help="peak learning rate (preset default; the recipe: 6e-4)")
    g.add_argument("--schedule-steps", type=int, help="length of the warm-up + cosine schedule (default: "
                   "the preset's, else --max-steps, else 10000)")
    g.add_argument("--warmup-ratio", type=float, help="warm-up share of the schedule (default 0.04, the recipe)")
    g.add_argument("--warmup-steps", type=int, help="warm-up steps (overrides --warmup-ratio)")
    g.add_argument("--min-lr-ratio", type=float, help="the cosine ends at lr times this (default 0, the recipe)")
    g.add_argument("--grad-clip", type=float, default=1.0)
    g.add_argument("--grad-accum", type=int, default=1, help="micro-batches per optimizer step and drafter "
                   "thread (sequences per step = drafter threads x --batch-size x this; the recipe's is 64)")
    g.add_argument("--use-reentrant", type=_bool, default=False, metavar="{true,false}",
                   help="activation checkpointing mode of the draft layers and CE chunks (default false)")
    g.add_argument("--checkpoint-layers", type=_bool, metavar="{true,false}",
                   help="activation-checkpoint the draft layers (default: true on tiny, false on GPU presets)")
    g.add_argument("--no-checkpoint-layers", action="store_true", help="same as --checkpoint-layers false")
    g.add_argument("--loss", choices=LOSSES, help="chunked: checkpointed fp32-logit chunks (recomputed); fused: "
                   "the input gradient in the forward pass, no recompute (tiny's default); fused-compiled: its "
                   "epilogue torch.compile'd, no fp32 copy of a chunk (the GPU presets' default)")
    g.add_argument("--block-mask", choices=MASK_BUILDS, help="how the flex BlockMask is built each step: "
                   "mask_mod over every (query, key) pair (tiny's default) or from the sorted anchors (GPU presets)")
    g.add_argument("--fused-adamw", type=_bool, metavar="{true,false}",
                   help="AdamW's fused kernel (default: true on GPU presets)")
    g.add_argument("--compile-layers", type=_bool, nargs="?", const=True, metavar="{true,false}",
                   help="torch.compile each draft decoder layer, compiled and warmed up before the threads start "
                   "(default: true on GPU presets, false on tiny; bare --compile-layers = true)")
    g.add_argument("--short-conv", choices=("auto", "torch", "fla"), help="GatedDeltaNet short conv: "
                   "transformers' torch reference, fla's Triton kernel, or auto (fla when importable on CUDA; "
                   "the GPU presets' default, torch on tiny)")
    g.add_argument("--cuda-graphs", choices=MODES,
                   help="CUDA graphs, captured per thread (each thread its own graphs, memory pool and stream; "
                   "replayed only by the thread that captured them): off (the presets' default), target (the "
                   "target forward, one graph per length bucket), all (also each drafter thread's step). "
                   "Emulated on CPU")
    g.add_argument("--length-buckets", type=int, metavar="N",
                   help="run the target forward at the smallest of N fixed lengths that holds the batch (less "
                   "padding computed; the graphs' static shapes). 0 (the presets' default): the padded width, or "
                   "one bucket with --cuda-graphs")
    g.add_argument("--ce-chunk-tokens", type=int, metavar="N",
                   help="positions per lm_head + CE chunk (preset default: 2048; one chunk of N x vocab logits "
                   "exists at a time)")
    g.add_argument("--compile", action="store_true", help="torch.compile the whole drafter")
    g.add_argument("--compile-backend", default="inductor")
    g = p.add_argument_group("run control")
    g.add_argument("--max-steps", type=int, help="stop cleanly after this many drafter steps (total, across resumes)")
    g.add_argument("--max-seconds", type=float, help="stop cleanly after this many seconds")
    g.add_argument("--checkpoint-dir", default="runs/reference_trainer",
                   help="where checkpoint.pt is written (end of run, SIGTERM, --save-every)")
    g.add_argument("--save-every", type=int, default=0, help="also checkpoint every N steps (0: off)")
    g.add_argument("--resume", nargs="?", const="auto", metavar="PATH",
                   help="continue from PATH (default: CHECKPOINT_DIR/checkpoint.pt)")
    g = p.add_argument_group("observability")
    g.add_argument("--log-interval", type=int, help="steps between log lines (preset default)")
    g.add_argument("--summary-json", help="write the end-of-run summary here")
    g.add_argument("--metrics-jsonl", help="one JSON line per step (costs a CPU-GPU sync per step)")
    g.add_argument("--wandb", default="auto", choices=("auto", "online", "offline", "off"),
                   help="auto: offline unless WANDB_MODE / a wandb login says otherwise")
    g.add_argument("--probes", help="all (default) | none | comma list, e.g. gil,queues or all,-gil "
                   "(default: $DFLASH_DIAG_PROBES, else all)")
    g.add_argument("--scenario", choices=sorted(scenarios.SCENARIOS),
                   help="reproduce one failure of the seed incident (docs/trainer.md)")
    return p


def _parse_probes(text: str | None) -> frozenset[str]:
    import probes

    if text is None:  # not given: what `dflash-diag run` put in the environment, else all
        text = os.environ.get(probes.ENV_PROBES, "all")
    try:
        return probes.parse_probe_list(text)
    except ValueError as err:
        raise UserError(f"--probes: {err}", ExitCode.USAGE) from err


def _given(**values: Any) -> dict[str, Any]:
    """The flags the user gave (not None): they override the preset's values."""
    return {k: v for k, v in values.items() if v is not None}


def _switches(args: argparse.Namespace, fields: dict[str, Any]) -> dict[str, Any]:
    """Speed switches: a flag wins, then the preset, then TrainConfig's default."""
    checkpoint = False if args.no_checkpoint_layers else args.checkpoint_layers
    preset = {k: fields[k] for k in ("checkpoint_layers", "fused_adamw", "compile_layers") if k in fields}
    return {**preset, **_given(checkpoint_layers=checkpoint, fused_adamw=args.fused_adamw,
                               compile_layers=args.compile_layers)}


def _schedule(args: argparse.Namespace, fields: dict[str, Any]) -> dict[str, Any]:
    """Schedule fields: a flag wins, then the preset, then the recipe (schedule = the planned --max-steps)."""
    out: dict[str, Any] = {"schedule_steps": args.schedule_steps or fields.get("schedule_steps")
                           or args.max_steps or 10_000}
    for name in ("warmup_ratio", "warmup_steps", "min_lr_ratio"):
        value = getattr(args, name)
        if value is not None or name in fields:
            out[name] = value if value is not None else fields[name]
    return out


def parse_args(argv: list[str] | None) -> tuple[TrainConfig, bool]:
    """The validated config and whether to run sequentially. UserError (exit 2) on a bad flag."""
    args = build_parser().parse_args(argv)
    if args.cpu_threads < 1:
        raise UserError(f"--cpu-threads must be >= 1, got {args.cpu_threads}", ExitCode.USAGE)
    torch.set_num_threads(args.cpu_threads)
    cuda = torch.cuda.is_available()
    try:
        preset = resolve_preset(args.preset, cuda)
    except ValueError as err:
        raise UserError(str(err), ExitCode.USAGE) from err
    fields = preset_fields(preset)
    if args.ddp and not ddp.launched_by_torchrun():
        raise UserError("--ddp: RANK, WORLD_SIZE and MASTER_ADDR are not set: launch it with torchrun "
                        "(torchrun --nproc-per-node 2 -m reference_trainer --ddp ...)", ExitCode.USAGE)
    default_device = (f"cuda:{ddp.local_rank()}" if args.ddp else "cuda:0") if cuda else "cpu"
    target_devices = args.target_devices or (default_device,)
    drafter_devices = args.drafter_devices or (default_device,)
    for device in (*target_devices, *drafter_devices):
        if device.startswith("cuda") and not cuda:
            raise UserError(f"device {device}: CUDA is not available here (use cpu)", ExitCode.USAGE)
    try:
        data = dataclasses.replace(
            fields["data"], seed=args.seed, jsonl=args.data,
            **({"seq_len": args.seq_len, "min_seq_len": min(fields["data"].min_seq_len, args.seq_len)}
               if args.seq_len else {}),
            **({"batch_size": args.batch_size} if args.batch_size else {}),
        )
        objective = dataclasses.replace(fields["objective"], use_reentrant=args.use_reentrant,
                                        **_given(num_anchors=args.num_anchors, loss=args.loss,
                                                 mask_build=args.block_mask, ce_chunk_tokens=args.ce_chunk_tokens))
        target = dataclasses.replace(fields["target"], path=args.target_path, **_given(short_conv=args.short_conv))
        config = TrainConfig(
            preset=preset, target=target, drafter=fields["drafter"], objective=objective, data=data,
            target_devices=target_devices, drafter_devices=drafter_devices,
            queue_size=args.queue_size or fields["queue_size"], lr=args.lr or fields["lr"],
            **({"adam_betas": fields["adam_betas"]} if "adam_betas" in fields else {}),
            **_schedule(args, fields), grad_clip=args.grad_clip, grad_accum=args.grad_accum,
            max_steps=args.max_steps,
            max_seconds=args.max_seconds, log_interval=args.log_interval or fields["log_interval"],
            save_every=args.save_every, checkpoint_dir=args.checkpoint_dir, resume=args.resume,
            compile=args.compile, compile_backend=args.compile_backend, seed=args.seed, scenario=args.scenario,
            probes=_parse_probes(args.probes), wandb=args.wandb, summary_json=args.summary_json,
            metrics_jsonl=args.metrics_jsonl, ddp=args.ddp, **_switches(args, fields),
            graphs=dataclasses.replace(fields.get("graphs", GraphConfig()),
                                       **_given(mode=args.cuda_graphs, length_buckets=args.length_buckets)),
        )
        config = scenarios.apply_to_config(config)
    except ValueError as err:
        raise UserError(str(err), ExitCode.USAGE) from err
    return config, args.sequential


def main(argv: list[str] | None = None) -> int:
    # The run's modules (probes, threads) only once the flags parse: --help and flag errors stay light.
    from reference_trainer.build import build
    from reference_trainer.train import Run

    warnings.filterwarnings("ignore", message=".*torch.utils.checkpoint.*")
    try:
        config, sequential = parse_args(argv)
        run = Run(build(config), sequential=sequential)
    except UserError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return err.exit_code
    except (TargetLoadError, DataError) as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    return run.run()
