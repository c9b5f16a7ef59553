"""Counting and reporting: throughput counters, the loss window, the log line, and where metrics go.

The loss and accuracy of each step stay on the device, summed over the log window; they reach the host once
per log line (a ``SYNC:``), never per step. Sinks: ``NullSink`` (``--wandb off``) and ``WandbSink``.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from reference_trainer.loss import LossParts

if TYPE_CHECKING:
    from reference_trainer.build import Built
    from reference_trainer.config import TrainConfig

# --------------------------------------------------------------------------------------------------------
# Where metrics go
# --------------------------------------------------------------------------------------------------------


class MetricsSink(Protocol):
    def log(self, metrics: dict[str, Any], step: int) -> None: ...

    def finish(self) -> None: ...


class NullSink:
    """``--wandb off``: metrics go nowhere (the log line and the probe board still get them)."""

    def log(self, metrics: dict[str, Any], step: int) -> None:
        return None

    def finish(self) -> None:
        return None


class WandbSink:
    """wandb, lazily imported, offline unless the user configured otherwise; it can never break a run."""

    def __init__(self, mode: str, config: dict[str, Any], directory: Path) -> None:
        self.run: Any = None
        try:
            import wandb  # lazy: slow to import, and optional

            if mode == "auto":
                configured = bool(os.environ.get("WANDB_API_KEY")) or "api.wandb.ai" in _netrc_text()
                mode = os.environ.get("WANDB_MODE") or ("online" if configured else "offline")
            directory.mkdir(parents=True, exist_ok=True)
            self.run = wandb.init(project="dflash-reference-trainer", mode=mode, config=config, dir=str(directory),
                                  settings=wandb.Settings(init_timeout=60, console="off"))
        except Exception as err:  # wandb must never stop training
            print(f"warning: wandb disabled: {type(err).__name__}: {err}", file=sys.stderr)
            self.run = None

    def log(self, metrics: dict[str, Any], step: int) -> None:
        if self.run is None:
            return
        try:
            self.run.log(metrics, step=step)
        except Exception as err:
            print(f"warning: wandb disabled after a failed log: {err}", file=sys.stderr)
            self.run = None

    def finish(self) -> None:
        if self.run is not None:
            with contextlib.suppress(Exception):
                self.run.finish()


def make_sink(mode: str, config: dict[str, Any], directory: Path) -> MetricsSink:
    return NullSink() if mode == "off" else WandbSink(mode, config, directory)


def _netrc_text() -> str:
    with contextlib.suppress(OSError):
        return (Path.home() / ".netrc").read_text()
    return ""


# --------------------------------------------------------------------------------------------------------
# Counting
# --------------------------------------------------------------------------------------------------------


@dataclass
class Counters:
    """Run totals. ``target_batches`` is counted by every target thread, so under ``lock`` (a ``+=`` on a
    shared attribute is a read-modify-write); the rest are written by drafter-0 alone."""

    target_batches: int = 0
    drafter_batches: int = 0
    tokens: int = 0
    depth_sum: float = 0.0
    depth_samples: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add_target_batch(self) -> None:
        with self.lock:
            self.target_batches += 1


@dataclass(frozen=True)
class Window:
    """A point to measure rates from: a time and the counters then."""

    time_s: float
    target_batches: int
    drafter_batches: int
    tokens: int


class Meter:
    """Counters, the on-device loss window, the log line and the rates of one run (drafter-0 writes it)."""

    def __init__(self, start_step: int, loss_first: float | None) -> None:
        self.counters = Counters()
        self.start_step = start_step
        self.start_time = self.last_step_time = time.monotonic()
        self.first_step_window: Window | None = None  # rates exclude the first step (warm-up, compiles)
        self.window = Window(self.start_time, 0, 0, 0)
        self.end_time: float | None = None
        self.loss_first = loss_first
        self.loss_last: float | None = None
        self.acc_last: float | None = None
        self._sums: dict[str, Any] = {}  # device-side sums since the last log line

    def start_clock(self) -> None:
        self.start_time = self.last_step_time = time.monotonic()
        self.window = Window(self.start_time, 0, 0, 0)

    def _snapshot(self, now: float) -> Window:
        c = self.counters
        return Window(now, c.target_batches, c.drafter_batches, c.tokens)

    def record_step(self, parts: Sequence[LossParts], tokens: int, depth: int) -> float:
        """Count one optimizer step over ``len(parts)`` replicas; returns the step's wall time in ms."""
        now = time.monotonic()
        c = self.counters
        c.drafter_batches += len(parts)
        c.tokens += tokens
        c.depth_sum += depth
        c.depth_samples += 1
        step_ms = (now - self.last_step_time) * 1e3
        self.last_step_time = now
        if self.first_step_window is None:
            self.first_step_window = self._snapshot(now)
        # Window sums stay on the device (no sync per step); lead device = replica 0's.
        lead = parts[0].loss.device
        s = self._sums
        s["loss"] = s.get("loss", 0) + sum(p.loss.to(lead) for p in parts) / len(parts)
        s["correct"] = s.get("correct", 0) + sum(p.correct.to(lead) for p in parts)
        s["trained"] = s.get("trained", 0) + sum(p.trained.to(lead) for p in parts)
        s["steps"] = s.get("steps", 0) + 1
        return step_ms

    def step_values(self, parts: Sequence[LossParts]) -> tuple[float, float]:
        """SYNC: this step's mean loss and accuracy to the host (only for --metrics-jsonl)."""
        lead = parts[0].loss.device
        loss = float(sum(p.loss.to(lead) for p in parts) / len(parts))
        correct = int(sum(p.correct.to(lead) for p in parts))
        trained = int(sum(p.trained.to(lead) for p in parts))
        return loss, correct / max(1, trained)

    def close_window(self) -> None:
        """SYNC: the window's mean loss and accuracy to the host, once per log line."""
        s = self._sums
        self.loss_last = float(s["loss"]) / s["steps"]
        self.acc_last = int(s["correct"]) / max(1, int(s["trained"]))
        if self.loss_first is None:
            self.loss_first = self.loss_last  # the first log line is step 1 alone
        self._sums = {}

    def rates(self, since: Window, now: float) -> dict[str, float]:
        c = self.counters
        span = max(1e-9, now - since.time_s)
        return {"tokens_per_s": (c.tokens - since.tokens) / span,
                "target_batches_per_s": (c.target_batches - since.target_batches) / span,
                "drafter_batches_per_s": (c.drafter_batches - since.drafter_batches) / span}

    def window_rates(self) -> dict[str, float]:
        """Rates since the previous log line; starts the next window."""
        now = time.monotonic()
        rates = self.rates(self.window, now)
        self.window = self._snapshot(now)
        return rates

    def run_rates(self, steps_this_run: int) -> dict[str, float]:
        """Rates over the whole run, excluding the first step when there was more than one."""
        end = self.end_time if self.end_time is not None else time.monotonic()
        base = self.first_step_window if steps_this_run > 1 and self.first_step_window else Window(
            self.start_time, 0, 0, 0)
        return self.rates(base, end)

    def log_line(self, step: int, rates: dict[str, float], depth: int, queue_size: int, step_ms: float) -> str:
        return (f"step {step:>6} | tok/s {rates['tokens_per_s']:>9,.0f} | q_hs {depth}/{queue_size} | "
                f"target {rates['target_batches_per_s']:6.2f} b/s | drafter {rates['drafter_batches_per_s']:6.2f} b/s | "
                f"loss {self.loss_last:7.4f} | acc {self.acc_last:5.3f} | step {step_ms:8.1f} ms")


def banner_lines(built: Built, config: TrainConfig, sequential: bool) -> list[str]:
    """What the run is, before its first step: threads, kernels, drafter, speed switches, scenario."""
    params = sum(p.numel() for p in built.replicas[0].model.parameters())
    mode = "sequential (no threads)" if sequential else (
        f"{len(config.target_devices)} target thread(s) on {','.join(config.target_devices)}, "
        f"{len(config.drafter_devices)} drafter thread(s) on {','.join(config.drafter_devices)}, q_hs {config.queue_size}")
    objective = config.objective
    lines = [f"reference_trainer: preset {config.preset}, {mode}",
             f"  {built.kernels.line()}; short conv: {built.kernels.short_conv}",
             f"  drafter: {params / 1e6:.1f} M trainable params, taps target layers {config.drafter.target_layer_ids}, "
             f"attention {built.attention}, checkpoint use_reentrant={objective.use_reentrant}"
             f"{', compiled' if config.compile else ''}",
             f"  speed: loss {objective.loss}, block mask {objective.mask_build}, layer checkpointing "
             f"{'on' if config.checkpoint_layers else 'off'}, compiled layers {'on' if config.compile_layers else 'off'}, "
             f"fused AdamW {'on' if config.fused_adamw else 'off'}"]
    lines.extend(_graph_lines(built, config))
    if config.scenario:
        lines.append(f"  scenario {config.scenario}: {built.scenario.description}")
    return lines


def _graph_lines(built: Built, config: TrainConfig) -> list[str]:
    """--cuda-graphs and --length-buckets, when either is on (the default run's banner is unchanged)."""
    graphs = config.graphs
    buckets = graphs.buckets(config.data.min_seq_len, config.data.seq_len)
    if graphs.mode == "off" and not buckets:
        return []
    cuda = built.replicas[0].device.type == "cuda"
    how = "captured per thread: own graphs, memory pool and stream" if cuda else "emulated on CPU: no capture"
    line = f"  cuda graphs {graphs.mode} ({how})" if graphs.mode != "off" else "  cuda graphs off"
    line += f"; target length buckets {','.join(map(str, buckets))}" if buckets else ""
    if graphs.drafter:
        from reference_trainer.step import drafter_graph_blocker

        blocker = drafter_graph_blocker(config, built.scenario, built.replicas[0].device)
        line += f"; drafter step eager: {blocker}" if blocker else "; drafter step graphed"
    return [line]
