"""The threaded DFlash trainer: target threads -> q_hs -> drafter threads.

Read top to bottom:

1. ``parse_args``: the CLI, turned into a validated ``TrainConfig``.
2. ``Pipeline.build``: the frozen target (one per distinct target device), the drafter replicas (one per
   drafter thread, identical at init), data, the bounded queue ``q_hs``, probes, wandb.
3. ``Pipeline._target_loop``: one thread per ``--target-devices`` entry (``target-0``, ...): claim a batch
   index, run the target forward, put the hidden states on ``q_hs``.
4. ``Pipeline._drafter_loop``: one thread per ``--drafter-devices`` entry (``drafter-0``, ...). Several
   drafter threads train ONE drafter: each replica does forward+backward on its own batch, then, between
   two barriers, drafter-0 averages the gradients of all replicas into every replica; each replica then
   takes the same clipped AdamW step, so the replicas stay bit-identical (tested).
5. ``Pipeline.run``: the main thread only supervises: signals, errors, the end of the run, the checkpoint
   and the summary.

Failure rules: every thread runs inside ``_guard``; the first exception anywhere sets ``stop``, breaks the
barrier, and the main thread exits non-zero with that error within seconds (queue waits use timeouts,
never a bare blocking call). SIGTERM / Ctrl-C: the current step finishes, a checkpoint is written
atomically, exit 0; ``--resume`` continues with no lost step.

CPU-GPU synchronisation points are marked ``SYNC:`` in comments; there are none on the per-step path
except at log intervals (loss/accuracy to the host) and the optional ``--metrics-jsonl``.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import ctypes
import dataclasses
import json
import math
import os
import queue
import signal
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from reference_trainer import scenarios
from reference_trainer.config import PRESETS, TrainConfig, preset_fields, resolve_preset
from reference_trainer.data import Batch, DataError, make_source
from reference_trainer.drafter import CheckpointMode, DFlashDraftModel
from reference_trainer.loss import (
    Blocks,
    LossParts,
    build_blocks,
    chunked_loss,
    dense_block_mask,
    flex_attention_fn,
    flex_block_mask,
    sample_anchors,
)
from reference_trainer.target import FrozenTarget, TargetLoadError, force_gdn_torch_fallback, load_target

PROG = "python -m reference_trainer"
QUEUE_POLL_S = 0.25  # how often a blocked put/get re-checks the stop flag
FAIL_AT_ENV = "REFERENCE_TRAINER_FAIL_AT"  # test-only fault injection: "target:3" or "drafter:2"
CHECKPOINT_VERSION = 1


class UserError(Exception):
    """A mistake of the user's (flag, path, file): one line on stderr, exit code, no traceback."""

    def __init__(self, message: str, exit_code: int = 6) -> None:
        super().__init__(message)
        self.exit_code = exit_code


# --------------------------------------------------------------------------------------------------------
# 1. The command line
# --------------------------------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, not argparse's usage + error pair
        raise UserError(f"{message} (see {PROG} --help)", exit_code=2)


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
    g.add_argument("--sequential", action="store_true",
                   help="no threads: target forward then drafter step in the main thread (the baseline)")
    g = p.add_argument_group("optimisation")
    g.add_argument("--lr", type=float)
    g.add_argument("--warmup-steps", type=int)
    g.add_argument("--decay-steps", type=int, default=10_000)
    g.add_argument("--grad-clip", type=float, default=1.0)
    g.add_argument("--use-reentrant", type=_bool, default=False, metavar="{true,false}",
                   help="activation checkpointing mode of the draft layers and CE chunks (default false)")
    g.add_argument("--no-checkpoint-layers", action="store_true", help="do not checkpoint the draft layers")
    g.add_argument("--compile", action="store_true", help="torch.compile the drafter")
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
        raise UserError(f"--probes: {err}", exit_code=2) from err


def parse_args(argv: list[str] | None) -> tuple[TrainConfig, bool]:
    args = build_parser().parse_args(argv)
    if args.cpu_threads < 1:
        raise UserError(f"--cpu-threads must be >= 1, got {args.cpu_threads}", exit_code=2)
    torch.set_num_threads(args.cpu_threads)
    cuda = torch.cuda.is_available()
    try:
        preset = resolve_preset(args.preset, cuda)
    except ValueError as err:
        raise UserError(str(err), exit_code=2) from err
    fields = preset_fields(preset)
    default_device = "cuda:0" if cuda else "cpu"
    target_devices = args.target_devices or (default_device,)
    drafter_devices = args.drafter_devices or (default_device,)
    for device in (*target_devices, *drafter_devices):
        if device.startswith("cuda") and not cuda:
            raise UserError(f"device {device}: CUDA is not available here (use cpu)", exit_code=2)
    try:
        data = dataclasses.replace(
            fields["data"], seed=args.seed, jsonl=args.data,
            **({"seq_len": args.seq_len, "min_seq_len": min(fields["data"].min_seq_len, args.seq_len)}
               if args.seq_len else {}),
            **({"batch_size": args.batch_size} if args.batch_size else {}),
        )
        objective = dataclasses.replace(fields["objective"], use_reentrant=args.use_reentrant,
                                        **({"num_anchors": args.num_anchors} if args.num_anchors else {}))
        target = dataclasses.replace(fields["target"], path=args.target_path)
        config = TrainConfig(
            preset=preset, target=target, drafter=fields["drafter"], objective=objective, data=data,
            target_devices=target_devices, drafter_devices=drafter_devices,
            queue_size=args.queue_size or fields["queue_size"], lr=args.lr or fields["lr"],
            warmup_steps=fields["warmup_steps"] if args.warmup_steps is None else args.warmup_steps,
            decay_steps=args.decay_steps, grad_clip=args.grad_clip, max_steps=args.max_steps,
            max_seconds=args.max_seconds, log_interval=args.log_interval or fields["log_interval"],
            save_every=args.save_every, checkpoint_dir=args.checkpoint_dir, resume=args.resume,
            compile=args.compile, compile_backend=args.compile_backend, seed=args.seed, scenario=args.scenario,
            probes=_parse_probes(args.probes), wandb=args.wandb, summary_json=args.summary_json,
            metrics_jsonl=args.metrics_jsonl, checkpoint_layers=not args.no_checkpoint_layers,
        )
        config = scenarios.apply_to_config(config)
    except ValueError as err:
        raise UserError(str(err), exit_code=2) from err
    return config, args.sequential


# --------------------------------------------------------------------------------------------------------
# 2. Pieces the threads share
# --------------------------------------------------------------------------------------------------------


def name_this_thread(name: str) -> None:
    """Python name (py-spy, probes) and, best effort, the kernel name (/proc/<pid>/task/<tid>/comm, top -H).

    Never on the main thread: its kernel name is the process name that ps and top show."""
    threading.current_thread().name = name
    if threading.current_thread() is threading.main_thread():
        return
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(15, name.encode()[:15], 0, 0, 0)  # 15 = PR_SET_NAME


class BatchLedger:
    """Which batch indices the drafters consumed, so a resumed run regenerates exactly the rest.

    Producers may run ahead and several of them may deliver out of order: the state is the first
    unconsumed index plus the consumed indices beyond it.
    """

    def __init__(self, cursor: int = 0, consumed_ahead: list[int] | None = None) -> None:
        self._lock = threading.Lock()
        self._cursor = cursor
        self._next = cursor
        self._done = set(consumed_ahead or [])

    def claim(self) -> int:
        with self._lock:
            while self._next in self._done:
                self._next += 1
            index = self._next
            self._next += 1
            return index

    def consumed(self, index: int) -> None:
        with self._lock:
            self._done.add(index)
            while self._cursor in self._done:
                self._done.remove(self._cursor)
                self._cursor += 1

    def state(self) -> dict[str, Any]:
        with self._lock:
            return {"cursor": self._cursor, "consumed_ahead": sorted(self._done)}


@dataclass
class HiddenBatch:
    """One q_hs item: the batch, the target's hidden states, and the CUDA event that marks them ready."""

    batch: Batch
    hidden: torch.Tensor  # [B, S, n_tapped * H] on the target device
    ready: torch.cuda.Event | None  # recorded on the producing stream; None on CPU
    producer: str


@dataclass
class Replica:
    """One drafter thread's copy of the drafter, its optimiser, and the frozen embedding/lm_head."""

    rank: int
    device: torch.device
    model: DFlashDraftModel
    embed_weight: torch.Tensor
    lm_head_weight: torch.Tensor
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LambdaLR
    last: LossParts | None = None
    last_tokens: int = 0
    forward: Callable[..., torch.Tensor] | None = None  # the (maybe compiled) drafter forward
    # CUDA only: recorded on this replica's stream when its backward has been issued. Replicas run on
    # streams of their own, so the gradient average must wait for it on the GPU, not only on the barrier.
    backward_done: torch.cuda.Event | None = None


def _lr_lambda(warmup: int, decay: int) -> Callable[[int], float]:
    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / decay)
        return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress))

    return factor


class WandbSink:
    """wandb, lazily imported, offline unless the user configured otherwise; it can never break a run."""

    def __init__(self, mode: str, config: dict[str, Any], directory: Path) -> None:
        self.run: Any = None
        if mode == "off":
            return
        try:
            import wandb  # lazy: slow to import, and optional

            if mode == "auto":
                configured = bool(os.environ.get("WANDB_API_KEY")) or "api.wandb.ai" in _netrc_text()
                mode = os.environ.get("WANDB_MODE") or ("online" if configured else "offline")
            directory.mkdir(parents=True, exist_ok=True)
            self.run = wandb.init(project="dflash-reference-trainer", mode=mode, config=config, dir=str(directory),
                                  settings=wandb.Settings(init_timeout=60, console="off"))
        except Exception as err:  # noqa: BLE001 - wandb must never stop training
            print(f"warning: wandb disabled: {type(err).__name__}: {err}", file=sys.stderr)
            self.run = None

    def log(self, metrics: dict[str, Any], step: int) -> None:
        if self.run is None:
            return
        try:
            self.run.log(metrics, step=step)
        except Exception as err:  # noqa: BLE001
            print(f"warning: wandb disabled after a failed log: {err}", file=sys.stderr)
            self.run = None

    def finish(self) -> None:
        if self.run is not None:
            with contextlib.suppress(Exception):
                self.run.finish()


def _netrc_text() -> str:
    with contextlib.suppress(OSError):
        return (Path.home() / ".netrc").read_text()
    return ""


def _atomic_write_bytes(path: Path, write: Callable[[Any], None]) -> None:
    """Write to a private temp file in the same directory, fsync, then rename: never a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def _to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Host -> device without a sync: a pageable-memory copy blocks the CPU until the stream drains, so the
    (small) host tensors are pinned first and copied asynchronously."""
    if device.type != "cuda":
        return tensor.to(device)
    return tensor.pin_memory().to(device, non_blocking=True)


def _fault_point(role: str, count: int) -> None:
    """Test-only: ``REFERENCE_TRAINER_FAIL_AT=target:3`` raises in the 3rd batch of a target thread."""
    spec = os.environ.get(FAIL_AT_ENV)
    if spec and spec == f"{role}:{count}":
        raise RuntimeError(f"injected failure ({FAIL_AT_ENV}={spec})")


# --------------------------------------------------------------------------------------------------------
# 3-5. The pipeline
# --------------------------------------------------------------------------------------------------------


@dataclass
class Counters:
    target_batches: int = 0
    drafter_batches: int = 0
    tokens: int = 0
    depth_sum: float = 0.0
    depth_samples: int = 0


@dataclass
class Window:
    """Start of the current log window (for rates)."""

    time_s: float
    target_batches: int
    drafter_batches: int
    tokens: int


@dataclass
class Pipeline:
    config: TrainConfig
    sequential: bool = False
    stop: threading.Event = field(default_factory=threading.Event)  # set on error or at the end
    graceful: threading.Event = field(default_factory=threading.Event)  # SIGTERM/Ctrl-C: stop after this step
    errors: list[tuple[str, BaseException, str]] = field(default_factory=list)
    counters: Counters = field(default_factory=Counters)
    step: int = 0
    finish: bool = False
    stop_reason: str = ""
    loss_first: float | None = None
    loss_last: float | None = None
    acc_last: float | None = None
    start_step: int = 0
    end_time: float | None = None
    loss_window: dict[str, Any] = field(default_factory=dict)  # device-side sums since the last log line
    save_at_end: bool = True  # the benchmark turns this off (a 4B-preset checkpoint is ~6 GB)

    # ---- build -----------------------------------------------------------------------------------------

    def build(self) -> None:
        cfg = self.config
        torch.manual_seed(cfg.seed)
        self.scenario = scenarios.get(cfg.scenario)
        self.data = make_source(cfg.data)
        layer_ids = cfg.drafter.target_layer_ids
        self.targets: dict[str, FrozenTarget] = {}
        for device_name in dict.fromkeys(cfg.target_devices):
            device = torch.device(device_name)
            # Same seed per device: every target copy has the same random weights.
            torch.manual_seed(cfg.seed)
            dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
            self.targets[device_name] = load_target(cfg.target, layer_ids, device, dtype)
            if self.scenario.force_gdn_fallback:
                force_gdn_torch_fallback(self.targets[device_name].model)
        first_target = next(iter(self.targets.values()))
        self._check_target_shapes(first_target)
        from reference_trainer.target import gdn_kernel_report

        self.kernels = gdn_kernel_report(first_target.model, first_target.device)
        if self.scenario.force_gdn_fallback and self.kernels.fast is False and first_target.device.type == "cuda":
            self.kernels = dataclasses.replace(self.kernels, reason=f"forced by --scenario {cfg.scenario}")
        torch.manual_seed(cfg.seed + 1)
        template = DFlashDraftModel(cfg.drafter)
        template.checkpoint_mode = CheckpointMode(enabled=cfg.checkpoint_layers,
                                                  use_reentrant=cfg.objective.use_reentrant,
                                                  keyword_calls=self.scenario.keyword_checkpoint_calls)
        self.replicas = [self._make_replica(rank, torch.device(name), template, first_target)
                         for rank, name in enumerate(cfg.drafter_devices)]
        self.ledger = BatchLedger()
        if cfg.resume:
            self._load_checkpoint(Path(cfg.resume if cfg.resume != "auto" else self.checkpoint_path))
        self.barrier = threading.Barrier(len(self.replicas))
        self.grads_averaged: list[torch.cuda.Event] = []  # CUDA: recorded by _average_gradients each step
        self.first_call_lock = threading.Lock()
        # Triton's Autotuner keeps per-call state on the (process-global) kernel object, so two threads that
        # launch one autotuned kernel while either benchmarks a new shape key crash ("'NoneType' object is not
        # a mapping", seen on the H200 with two target threads). fla's GatedDeltaNet kernels autotune on keys
        # that follow the sequence length, so new keys appear all run long. Target threads therefore take
        # turns *issuing* their forward; the GPU work itself still overlaps (launches are asynchronous).
        cuda_targets = [d for d in cfg.target_devices if d.startswith("cuda")]
        self.target_launch_lock: contextlib.AbstractContextManager[Any] = (
            threading.Lock() if len(cuda_targets) > 1 else contextlib.nullcontext())

    def _check_target_shapes(self, target: FrozenTarget) -> None:
        """A --target-path checkpoint must have the shapes the preset's drafter was sized for."""
        hf = target.model.config
        drafter = self.config.drafter
        if (hf.hidden_size, hf.vocab_size) != (drafter.hidden_size, drafter.vocab_size):
            raise UserError(f"--target-path: hidden {hf.hidden_size} / vocab {hf.vocab_size} do not match preset "
                            f"{self.config.preset!r} (hidden {drafter.hidden_size} / vocab {drafter.vocab_size}); "
                            "pick the preset of that model size")

    def _make_replica(self, rank: int, device: torch.device, template: DFlashDraftModel,
                      any_target: FrozenTarget) -> Replica:
        model = copy.deepcopy(template).to(device)
        source = self.targets.get(str(device), any_target)
        # The drafter reuses the target's frozen embedding and lm_head: shared on the same device, copied otherwise.
        embed = source.embed_weight if source.device == device else source.embed_weight.to(device)
        lm_head = source.lm_head_weight if source.device == device else source.lm_head_weight.to(device)
        attention = self.config.objective.attention
        if attention == "auto":
            attention = "flex" if device.type == "cuda" else "sdpa"
        if self.scenario.eager_flex and device.type == "cuda":  # flex has no CPU backward: CUDA only
            attention = "flex-eager"
        model.flex = None if attention == "sdpa" else flex_attention_fn(compiled=attention == "flex")
        self.attention = attention
        cfg = self.config
        optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay,
                                      betas=(0.9, 0.95))
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _lr_lambda(cfg.warmup_steps, cfg.decay_steps))
        replica = Replica(rank=rank, device=device, model=model, embed_weight=embed, lm_head_weight=lm_head,
                          optimizer=optimizer, scheduler=scheduler)
        replica.forward = model
        if cfg.compile:
            if model.flex is not None:
                model.flex = flex_attention_fn(compiled=False)  # compiled as part of the drafter graph
            replica.forward = torch.compile(model, backend=cfg.compile_backend, dynamic=False)
        return replica

    @property
    def checkpoint_path(self) -> Path:
        return Path(self.config.checkpoint_dir) / "checkpoint.pt"

    # ---- checkpoint ------------------------------------------------------------------------------------

    def _load_checkpoint(self, path: Path) -> None:
        if not path.is_file():
            raise UserError(f"--resume: no checkpoint at {path} (run without --resume first, or give its path)")
        try:
            state = torch.load(path, map_location="cpu", weights_only=False)
        except Exception as err:  # noqa: BLE001 - any unpickling failure is a bad file
            raise UserError(f"--resume {path}: not a readable checkpoint ({type(err).__name__})") from err
        if not isinstance(state, dict) or state.get("version") != CHECKPOINT_VERSION:
            raise UserError(f"--resume {path}: not a reference_trainer checkpoint (version mismatch)")
        if state["drafter_config"] != self.config.drafter.official_config_dict():
            raise UserError(f"--resume {path}: written for a different drafter shape (preset "
                            f"{state.get('preset')!r}); use the same --preset")
        for replica in self.replicas:
            replica.model.load_state_dict(state["drafter"])
            replica.optimizer.load_state_dict(state["optimizer"])
            replica.scheduler.load_state_dict(state["scheduler"])
        self.step = self.start_step = int(state["step"])
        self.counters.tokens = 0
        self.ledger = BatchLedger(**state["ledger"])
        self.loss_first = state.get("loss_first")
        print(f"resumed from {path} at step {self.step} (next batch index {state['ledger']['cursor']})", flush=True)

    def save_checkpoint(self) -> Path:
        lead = self.replicas[0]
        state = {
            "version": CHECKPOINT_VERSION,
            "preset": self.config.preset,
            "step": self.step,
            "ledger": self.ledger.state(),
            # SYNC: .cpu() waits for the last step's kernels (once, at the end or every --save-every steps).
            "drafter": {k: v.detach().cpu() for k, v in lead.model.state_dict().items()},
            "drafter_config": self.config.drafter.official_config_dict(),
            "optimizer": lead.optimizer.state_dict(),
            "scheduler": lead.scheduler.state_dict(),
            "loss_first": self.loss_first,
            "config": self.config.flat(),
        }
        path = self.checkpoint_path
        _atomic_write_bytes(path, lambda handle: torch.save(state, handle))
        return path

    # ---- thread plumbing -------------------------------------------------------------------------------

    def _guard(self, name: str, body: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            name_this_thread(name)
            try:
                body()
            except threading.BrokenBarrierError:
                if not self.errors and not self.stop.is_set():
                    self._fail(name, RuntimeError("drafter barrier broken"))
            except BaseException as err:  # noqa: BLE001 - any failure stops the whole run
                self._fail(name, err)

        return run

    def _fail(self, name: str, err: BaseException) -> None:
        self.errors.append((name, err, traceback.format_exc()))
        self.stop.set()
        with contextlib.suppress(Exception):
            self.barrier.abort()  # wake drafter threads waiting for a replica that will never come

    def _put(self, item: HiddenBatch) -> bool:
        while not self.stop.is_set():
            try:
                self.q_hs.put(item, timeout=QUEUE_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def _get(self) -> HiddenBatch | None:
        while not self.stop.is_set():
            try:
                return self.q_hs.get(timeout=QUEUE_POLL_S)
            except queue.Empty:
                continue
        return None

    @contextlib.contextmanager
    def _stream(self, device: torch.device) -> Iterator[None]:
        """One CUDA stream per thread, so a target forward overlaps a drafter backward on the same GPU."""
        if device.type != "cuda":
            yield
            return
        torch.cuda.set_device(device)
        with torch.cuda.stream(torch.cuda.Stream(device)):
            yield

    # ---- 3. target threads -----------------------------------------------------------------------------

    def target_forward(self, target: FrozenTarget, batch: Batch) -> torch.Tensor:
        ids = _to_device(batch.input_ids, target.device)
        hidden = target.hidden_states(ids)
        for _ in range(self.scenario.target_repeat - 1):  # target-bound scenario: the same forward again
            hidden = target.hidden_states(ids)
        return hidden

    def _target_loop(self, rank: int, device_name: str) -> None:
        target = self.targets[device_name]
        produced = 0
        with self._stream(target.device):
            while not self.stop.is_set():
                index = self.ledger.claim()
                batch = self.data.batch(index)
                produced += 1
                _fault_point("target", produced)
                with self.target_launch_lock:
                    hidden = self.target_forward(target, batch)
                ready = None
                if target.device.type == "cuda":
                    ready = torch.cuda.Event()
                    ready.record()  # no sync: the consumer's stream waits on this event
                if not self._put(HiddenBatch(batch=batch, hidden=hidden, ready=ready, producer=f"target-{rank}")):
                    return
                self.counters.target_batches += 1

    # ---- 4. drafter threads ----------------------------------------------------------------------------

    def drafter_forward_backward(self, replica: Replica, item: HiddenBatch) -> LossParts:
        cfg = self.config
        device = replica.device
        batch = item.batch
        if item.ready is not None:
            torch.cuda.current_stream().wait_event(item.ready)  # GPU-side wait, no host sync
        hidden = item.hidden.to(device, non_blocking=True)
        if device.type == "cuda":
            # The tensor was allocated on the target's stream: tell the allocator this stream uses it too.
            hidden.record_stream(torch.cuda.current_stream())
        input_ids = _to_device(batch.input_ids, device)
        generator = torch.Generator().manual_seed(cfg.seed * 1_000_003 + batch.index)  # anchors: f(seed, batch)
        anchors, valid = sample_anchors(batch.loss_mask, batch.lengths, cfg.objective.num_anchors, generator)
        blocks: Blocks = build_blocks(input_ids, _to_device(batch.loss_mask, device), _to_device(batch.lengths, device),
                                      _to_device(anchors, device), _to_device(valid, device),
                                      cfg.drafter.mask_token_id, cfg.objective)
        seq = input_ids.shape[1]
        if replica.model.flex is not None:
            mask = flex_block_mask(blocks.anchors, blocks.block_valid, seq, cfg.objective.block_size)
        else:
            mask = dense_block_mask(blocks.anchors, blocks.block_valid, seq, cfg.objective.block_size)
        repeat = self.scenario.drafter_repeat
        autocast = (torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda"
                    else contextlib.nullcontext())
        parts = None
        for _ in range(repeat):  # drafter-bound scenario: same gradient, `repeat` times the work
            with autocast:
                noise = torch.nn.functional.embedding(blocks.block_ids, replica.embed_weight)
                assert replica.forward is not None
                out = replica.forward(noise, hidden, blocks.position_ids, mask)
                parts = chunked_loss(out, replica.lm_head_weight, blocks.labels, blocks.weights,
                                     cfg.objective.ce_chunk_tokens, use_reentrant=cfg.objective.use_reentrant,
                                     sync_per_chunk=self.scenario.sync_per_chunk)
            (parts.loss / repeat).backward()
        assert parts is not None
        # Keep numbers, not the graph: a live graph pins AccumulateGrad nodes to this step's stream.
        parts = LossParts(loss=parts.loss.detach(), weight_sum=parts.weight_sum.detach(), correct=parts.correct,
                          trained=parts.trained)
        self.scenario.after_backward(device)
        replica.last_tokens = batch.num_tokens
        if device.type == "cuda" and len(self.replicas) > 1:
            replica.backward_done = torch.cuda.Event()
            replica.backward_done.record()  # no sync: the averaging stream waits on it
        return parts

    def _combine_and_decide(self) -> None:
        """Drafter-0, between the two barriers: average gradients over replicas, decide whether to stop."""
        if len(self.replicas) > 1:
            self._average_gradients()
        self.step += 1
        elapsed = time.monotonic() - self.start_time
        cfg = self.config
        if self.graceful.is_set():
            self.stop_reason = "signal"
        elif cfg.max_steps is not None and self.step >= cfg.max_steps:
            self.stop_reason = "max_steps"
        elif cfg.max_seconds is not None and elapsed >= cfg.max_seconds:
            self.stop_reason = "max_seconds"
        self.finish = bool(self.stop_reason)

    def _average_gradients(self) -> None:
        """Average every replica's gradients into all replicas (drafter-0's thread, between the barriers).

        The barriers order the host threads, not the GPU streams: each replica's backward may still be
        running on its own stream. So the streams this thread copies on first wait for every replica's
        ``backward_done`` event, and every replica's stream later waits for ``grads_averaged`` before its
        optimizer step reads the averaged gradients and ``zero_grad`` frees them (without that wait the
        allocator can hand a freed gradient's memory to the next batch while a copy still writes it)."""
        lead = self.replicas[0]
        cuda_devices = sorted({r.device for r in self.replicas if r.device.type == "cuda"}, key=str)
        for replica in self.replicas:
            if replica.backward_done is not None:
                # GPU-side waits, no host sync. Cross-device copies run on the source device's current stream
                # (of this thread), so that stream must wait too.
                torch.cuda.current_stream(replica.device).wait_event(replica.backward_done)
                torch.cuda.current_stream(lead.device).wait_event(replica.backward_done)
        params = [list(r.model.parameters()) for r in self.replicas]
        for index in range(len(params[0])):
            grads = [p[index].grad for p in params]
            if any(g is None for g in grads):
                continue  # same on every replica (same code path): nothing to average
            mean = torch.stack([g.to(lead.device) for g in grads]).mean(0)  # cross-device copies are async
            for p in params:
                p[index].grad.copy_(mean)
        self.grads_averaged = []
        for device in cuda_devices:
            event = torch.cuda.Event()
            event.record(torch.cuda.current_stream(device))  # no sync: replicas' streams wait on these
            self.grads_averaged.append(event)

    def optimizer_step(self, replica: Replica) -> None:
        for event in self.grads_averaged if len(self.replicas) > 1 else ():
            torch.cuda.current_stream().wait_event(event)  # GPU-side wait for the average (see above)
        # clip_grad_norm_ returns the norm as a device tensor: no host sync unless someone reads it.
        torch.nn.utils.clip_grad_norm_(replica.model.parameters(), self.config.grad_clip)
        replica.optimizer.step()
        replica.scheduler.step()
        replica.optimizer.zero_grad(set_to_none=True)

    def _drafter_loop(self, rank: int) -> None:
        replica = self.replicas[rank]
        consumed = 0
        with self._stream(replica.device):
            while True:
                item = self._get()
                if item is None:
                    return
                consumed += 1
                _fault_point("drafter", consumed)
                # First call compiles flex_attention / the drafter: torch <= 2.11 compile is not thread-safe
                # (pytorch#126024, #123177), so first calls are serialised (unless the scenario says otherwise).
                first = consumed == 1 and not self.scenario.concurrent_first_compile
                with self.first_call_lock if first else contextlib.nullcontext():
                    replica.last = self.drafter_forward_backward(replica, item)
                self.ledger.consumed(item.batch.index)
                del item
                self.barrier.wait()
                if rank == 0:
                    self._combine_and_decide()
                self.barrier.wait()
                self.optimizer_step(replica)
                if rank == 0:
                    self._after_step()
                if self.finish:
                    return

    # ---- metrics ---------------------------------------------------------------------------------------

    def _after_step(self) -> None:
        cfg = self.config
        now = time.monotonic()
        c = self.counters
        c.drafter_batches += len(self.replicas)
        c.tokens += sum(r.last_tokens for r in self.replicas)
        c.depth_sum += self.q_hs.qsize()
        c.depth_samples += 1
        step_ms = (now - self.last_step_time) * 1e3
        self.last_step_time = now
        if self.first_step_time is None:
            self.first_step_time = now
            self.first_window = Window(now, c.target_batches, c.drafter_batches, c.tokens)
        log_now = self.step % cfg.log_interval == 0 or self.step == self.start_step + 1 or self.finish
        # Window sums stay on the device (no sync per step); lead device = drafter-0's.
        lead = self.replicas[0].device
        step_loss = sum(r.last.loss.to(lead) for r in self.replicas if r.last) / len(self.replicas)
        step_correct = sum(r.last.correct.to(lead) for r in self.replicas if r.last)
        step_trained = sum(r.last.trained.to(lead) for r in self.replicas if r.last)
        w = self.loss_window
        w["loss"], w["correct"], w["trained"] = (w.get("loss", 0) + step_loss, w.get("correct", 0) + step_correct,
                                                 w.get("trained", 0) + step_trained)
        w["steps"] = w.get("steps", 0) + 1
        if cfg.metrics_jsonl:
            # SYNC: the per-step loss to the host, every step (only with --metrics-jsonl).
            with open(cfg.metrics_jsonl, "a") as handle:
                handle.write(json.dumps({"step": self.step, "loss": float(step_loss),
                                         "accuracy": int(step_correct) / max(1, int(step_trained)),
                                         "batch_cursor": self.ledger.state()["cursor"]}) + "\n")
        if log_now:
            # SYNC: the window's mean loss and accuracy to the host, once per log line.
            self.loss_last = float(w["loss"]) / w["steps"]
            self.acc_last = int(w["correct"]) / max(1, int(w["trained"]))
            if self.loss_first is None:
                self.loss_first = self.loss_last  # the first log line is step 1 alone
            self.loss_window = {}
        if log_now:
            self._log_line(now, step_ms)
        if self.finish:
            # The last step's log line synced the device: the run's work is complete at this instant
            # (joining threads and writing the checkpoint are not part of the throughput).
            self.end_time = time.monotonic()
        self.session.step(self.step)
        if cfg.save_every and self.step % cfg.save_every == 0 and not self.finish:
            self.save_checkpoint()

    def _rates(self, now: float) -> dict[str, float]:
        w, c = self.window, self.counters
        span = max(1e-9, now - w.time_s)
        return {"tokens_per_s": (c.tokens - w.tokens) / span,
                "target_batches_per_s": (c.target_batches - w.target_batches) / span,
                "drafter_batches_per_s": (c.drafter_batches - w.drafter_batches) / span}

    def _log_line(self, now: float, step_ms: float) -> None:
        rates = self._rates(now)
        self.window = Window(now, self.counters.target_batches, self.counters.drafter_batches, self.counters.tokens)
        depth = self.q_hs.qsize()
        print(f"step {self.step:>6} | tok/s {rates['tokens_per_s']:>9,.0f} | q_hs {depth}/{self.config.queue_size} | "
              f"target {rates['target_batches_per_s']:6.2f} b/s | drafter {rates['drafter_batches_per_s']:6.2f} b/s | "
              f"loss {self.loss_last:7.4f} | acc {self.acc_last:5.3f} | step {step_ms:8.1f} ms", flush=True)
        metrics = {**rates, "loss": self.loss_last, "accuracy": self.acc_last, "step_ms": step_ms,
                   "q_hs_depth": depth, "lr": self.replicas[0].scheduler.get_last_lr()[0]}
        self.wandb.log(metrics, self.step)
        self._publish_app(step_ms=step_ms, **rates)

    def _publish_app(self, **metrics: Any) -> None:
        self.session.set_app(name="reference_trainer", step=self.step, loss=self.loss_last, accuracy=self.acc_last,
                             config=self.app_config, threads=self.thread_roles, scenario=self.config.scenario,
                             **metrics)

    # ---- 5. the supervisor -----------------------------------------------------------------------------

    def _install_signals(self) -> None:
        def handle(signum: int, frame: Any) -> None:
            if self.graceful.is_set():  # second signal: stop now, without the step
                self._fail("MainThread", KeyboardInterrupt(f"second {signal.Signals(signum).name}"))
                return
            print(f"{signal.Signals(signum).name}: finishing the current step, then checkpoint and exit",
                  file=sys.stderr, flush=True)
            self.graceful.set()

        self._previous_handlers = {sig: signal.signal(sig, handle) for sig in (signal.SIGTERM, signal.SIGINT)}

    def _start_probes(self) -> None:
        import probes

        cfg = self.config
        # Board dir / keep-board come from the environment (`dflash-diag run` sets them); the probe list from
        # --probes. If `dflash-diag run` already started a session, start() returns that one.
        # With wandb on, the probes' readings go into the run too (dflash/* beside loss and tok/s; an alert on a
        # critical finding), as `dflash-diag run --probes-to-wandb` does for any program.
        self.session = probes.start(dataclasses.replace(probes.config_from_env(), enabled=cfg.probes),
                                    wandb=True if cfg.wandb != "off" else None)
        self.q_hs = self.session.watch_queue("q_hs", queue.Queue(maxsize=cfg.queue_size))
        self.session.watch_model("drafter", self.replicas[0].model)
        self.thread_roles = {f"target-{i}": {"role": "target", "device": d} for i, d in enumerate(cfg.target_devices)}
        self.thread_roles.update({f"drafter-{i}": {"role": "drafter", "device": d}
                                  for i, d in enumerate(cfg.drafter_devices)})
        if self.sequential:
            self.thread_roles = {"MainThread": {"role": "sequential", "device": cfg.drafter_devices[0]}}
        self.app_config = {**cfg.flat(), "gdn_kernel": self.kernels.chunk_gated_delta_rule,
                           "attention": self.attention, "sequential": self.sequential}

    def banner(self) -> None:
        cfg = self.config
        params = sum(p.numel() for p in self.replicas[0].model.parameters())
        mode = "sequential (no threads)" if self.sequential else (
            f"{len(cfg.target_devices)} target thread(s) on {','.join(cfg.target_devices)}, "
            f"{len(cfg.drafter_devices)} drafter thread(s) on {','.join(cfg.drafter_devices)}, q_hs {cfg.queue_size}")
        print(f"reference_trainer: preset {cfg.preset}, {mode}", flush=True)
        print(f"  {self.kernels.line()}", flush=True)
        print(f"  drafter: {params / 1e6:.1f} M trainable params, taps target layers {cfg.drafter.target_layer_ids}, "
              f"attention {self.attention}, checkpoint use_reentrant={cfg.objective.use_reentrant}"
              f"{', compiled' if cfg.compile else ''}", flush=True)
        if cfg.scenario:
            print(f"  scenario {cfg.scenario}: {self.scenario.description}", flush=True)

    def reset_run_state(self) -> None:
        """Allow another ``run()`` on the same models (the benchmark alternates threaded and sequential)."""
        self.stop.clear()
        self.graceful.clear()
        self.errors.clear()
        self.counters = Counters()
        self.finish = False
        self.stop_reason = ""
        self.end_time = None
        self.loss_window = {}
        self.start_step = self.step
        self.loss_first = self.loss_last = self.acc_last = None

    def run(self) -> int:
        cfg = self.config
        self._start_probes()
        self.wandb = WandbSink(cfg.wandb, cfg.flat(), Path(cfg.checkpoint_dir))
        self.banner()
        self._install_signals()
        self.start_time = self.last_step_time = time.monotonic()
        self.first_step_time: float | None = None
        self.window = Window(self.start_time, 0, 0, 0)
        self.first_window = self.window
        self._publish_app(step_ms=None, tokens_per_s=None, target_batches_per_s=None, drafter_batches_per_s=None)
        extras = self.scenario.start(self)
        self.extra_threads = [t.name for t in extras]
        if self.sequential:
            threads: list[threading.Thread] = []
            self._guard("MainThread", self._sequential_loop)()
        else:
            threads = [threading.Thread(target=self._guard(f"target-{i}", lambda i=i, d=d: self._target_loop(i, d)),
                                        name=f"target-{i}", daemon=True)
                       for i, d in enumerate(cfg.target_devices)]
            drafters = [threading.Thread(target=self._guard(f"drafter-{i}", lambda i=i: self._drafter_loop(i)),
                                         name=f"drafter-{i}", daemon=True) for i in range(len(self.replicas))]
            threads += drafters
            for thread in threads:
                thread.start()
            while any(t.is_alive() for t in drafters) and not self.errors:
                for t in drafters:
                    t.join(timeout=0.2)
        self.stop.set()
        for thread in [*threads, *extras]:
            thread.join(timeout=10.0)
        self.scenario.finish()
        for sig, previous in self._previous_handlers.items():  # in-process callers (tests, bench) get theirs back
            signal.signal(sig, previous)
        return self._finish()

    def _sequential_loop(self) -> None:
        """The baseline: one thread, target forward then drafter step, no queue."""
        replica = self.replicas[0]
        target = next(iter(self.targets.values()))
        with self._stream(replica.device):
            while True:
                index = self.ledger.claim()
                batch = self.data.batch(index)
                hidden = self.target_forward(target, batch)
                self.counters.target_batches += 1
                item = HiddenBatch(batch=batch, hidden=hidden, ready=None, producer="MainThread")
                replica.last = self.drafter_forward_backward(replica, item)
                self.ledger.consumed(index)
                self._combine_and_decide()
                self.optimizer_step(replica)
                self._after_step()
                if self.finish:
                    return

    def _finish(self) -> int:
        cfg = self.config
        if self.errors:
            name, err, trace = self.errors[0]
            self.session.close()
            self.wandb.finish()
            if isinstance(err, KeyboardInterrupt):
                print(f"reference_trainer: interrupted ({err}); no checkpoint written", file=sys.stderr)
                return 130
            sys.stderr.write(trace)
            print(f"reference_trainer: thread {name} failed: {type(err).__name__}: {err}; run stopped",
                  file=sys.stderr, flush=True)
            return 1
        path = self.save_checkpoint() if self.save_at_end else None
        summary = self.summary()
        summary["checkpoint"] = str(path) if path else None
        if cfg.summary_json:
            _atomic_write_bytes(Path(cfg.summary_json), lambda h: h.write(json.dumps(summary, indent=2).encode()))
        print(f"done: {self.stop_reason}, step {self.step}, {summary['tokens_per_s']:,.0f} tok/s, "
              f"loss {summary['loss_first']} -> {summary['loss_last']}, checkpoint {path}", flush=True)
        self.wandb.finish()
        self.session.close()
        return 0

    def summary(self) -> dict[str, Any]:
        c = self.counters
        end = self.end_time if self.end_time is not None else time.monotonic()
        # Rates exclude the first step (model warm-up, compiles) when there is more than one step.
        base = self.first_window if self.step - self.start_step > 1 and self.first_step_time else Window(
            self.start_time, 0, 0, 0)
        span = max(1e-9, end - base.time_s)
        return {
            "steps": self.step,
            "steps_this_run": self.step - self.start_step,
            "resumed_from_step": self.start_step if self.config.resume else None,
            "stop_reason": self.stop_reason,
            "elapsed_s": end - self.start_time,
            "tokens": c.tokens,
            "tokens_per_s": (c.tokens - base.tokens) / span,
            "target_batches_per_s": (c.target_batches - base.target_batches) / span,
            "drafter_batches_per_s": (c.drafter_batches - base.drafter_batches) / span,
            "queue_depth_mean": c.depth_sum / max(1, c.depth_samples),
            "loss_first": self.loss_first,
            "loss_last": self.loss_last,
            "accuracy_last": self.acc_last,
            "threads": self.thread_roles,
            "extra_threads": getattr(self, "extra_threads", []),
            "preset": self.config.preset,
            "scenario": self.config.scenario,
            "sequential": self.sequential,
            "gdn_kernel": self.kernels.chunk_gated_delta_rule,
            "gdn_kernel_line": self.kernels.line(),
            "attention": self.attention,
            "use_reentrant": self.config.objective.use_reentrant,
            "torch": torch.__version__,
            "replica_max_abs_diff": self.replica_max_abs_diff(),
        }

    @torch.no_grad()
    def replica_max_abs_diff(self) -> float:
        """Largest parameter difference between any drafter replica and replica 0 (0.0: identical).

        Copies each replica's parameters to replica 0's device: a device sync, done once at the end of a run."""
        lead = self.replicas[0].model.state_dict()
        worst = 0.0
        for replica in self.replicas[1:]:
            for name, value in replica.model.state_dict().items():
                diff = (value.to(lead[name].device, torch.float32) - lead[name].float()).abs().max()
                worst = max(worst, float(diff))  # host sync (once per tensor, end of run only)
        return worst


def main(argv: list[str] | None = None) -> int:
    warnings.filterwarnings("ignore", message=".*torch.utils.checkpoint.*")
    try:
        config, sequential = parse_args(argv)
        pipeline = Pipeline(config, sequential=sequential)
        pipeline.build()
    except UserError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return err.exit_code
    except (TargetLoadError, DataError) as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 6
    return pipeline.run()
