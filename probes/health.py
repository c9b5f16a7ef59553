"""health: is the program training at all? Read at optimizer steps, sampled about once a second.

The incident's worst bug trained nothing while the loss still printed. This probe looks where such bugs show:

- torch's *global* optimizer step hooks (``register_optimizer_step_pre_hook`` / ``..._post_hook``, every optimizer
  class, no patch of any): each step is counted (a few ns); a step at least ``interval_s`` after the last sample
  is sampled, right after its backward and before the update: per parameter group, how many tensors have no
  gradient, an all-zero one or a non-finite one, the learning rate, and how much a few watched slices of the
  weights moved since the previous sample (|dw| / |w|: 0 is a group that does not train);
- ``Tensor.backward`` (wrapped: one clock read per call): the loss handed to it at a due sample is kept
  (detached, no sync) and its value read with the sample.

Cost: one sample reads every gradient's norm (``torch._foreach_norm``, a few kernels per device) and copies at most
``slices_per_group`` x ``slice_elems`` weights; everything read is stacked and brought to the host at once, one
device sync per device per sample (``sample_ms_mean`` on the board says what it cost). Nothing else runs on the
training path. What the readings mean is judged in ``dflash_contract.health`` (one logic for the findings of
``doctor`` and the alerts the program publishes).
"""

from __future__ import annotations

import math
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any

from dflash_contract.board import HealthKeys, PayloadKeys
from probes._common import HookGuard, JsonDict, loaded_module


@dataclass(frozen=True, kw_only=True)
class Config:
    interval_s: float = 1.0  # at most one sampled step per interval
    max_groups: int = 32
    max_tensors_per_group: int = 20_000
    slices_per_group: int = 8  # weight slices compared between samples, per group
    slice_elems: int = 4096


@dataclass
class _Group:
    """What the probe remembers of one parameter group between samples."""

    slices: list[Any] = field(default_factory=list)  # detached copies of a few weight slices (on their devices)
    row: dict[str, Any] = field(default_factory=dict)  # the last published reading
    unchanged_since: int | None = None
    lr_zero_since: int | None = None


class HealthProbe:
    name = "health"

    def __init__(self, config: Config) -> None:
        self.config = config
        self.guard = HookGuard()
        self._lock = threading.Lock()
        self._arm_lock = threading.Lock()
        self._closed = False
        self._handles: list[Any] = []
        self._backward: tuple[Any, Any] | None = None  # (torch.Tensor, its own backward)
        self._arm_failed = False
        self._steps = 0
        self._samples = 0
        self._last_sample_step: int | None = None
        self._next_sample_s = 0.0
        self._next_loss_s = 0.0
        self._loss_tensor: Any = None
        self._loss: float | None = None
        self._loss_bad_since: tuple[int, float] | None = None
        self._grad_bad_since: int | None = None
        self._groups: dict[str, _Group] = {}
        self._optimizer_ids: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        self._cost_ms: list[float] = []
        self._arm()

    # --- arming ---------------------------------------------------------------------------------------------

    def _arm(self) -> None:
        with self._arm_lock:
            if self._closed or self._arm_failed or self._handles:
                return
            optim = loaded_module("torch.optim.optimizer")
            torch = loaded_module("torch")
            if optim is None or torch is None:
                return
            try:
                self._handles = [optim.register_optimizer_step_pre_hook(self._on_step)]
                original = torch.Tensor.backward
                probe = self

                def backward(tensor: Any, *args: Any, **kwargs: Any) -> Any:
                    probe._note_loss(tensor)
                    return original(tensor, *args, **kwargs)

                backward.__wrapped__ = original  # type: ignore[attr-defined]
                torch.Tensor.backward = backward
                self._backward = (torch.Tensor, original)
            except Exception as exc:  # a torch without these hooks: the probe says so, training is untouched
                self._arm_failed = True
                self.guard.failed(exc)

    def watch_model(self, name: str, model: Any) -> None:
        self._arm()  # a program that names its model has imported torch.optim by now

    # --- on the training threads ------------------------------------------------------------------------------

    def _note_loss(self, tensor: Any) -> None:
        try:
            now = time.monotonic()
            if now >= self._next_loss_s and getattr(tensor, "numel", lambda: 0)() == 1:
                self._next_loss_s = now + self.config.interval_s
                self._loss_tensor = tensor.detach()  # no sync: read with the next sample
        except Exception as exc:  # never into the program's backward
            self.guard.failed(exc)

    def _on_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        try:
            self._steps += 1
            now = time.monotonic()
            if now < self._next_sample_s:
                return
            self._next_sample_s = now + self.config.interval_s
            t0 = time.perf_counter()
            self._sample(optimizer)
            self._cost_ms.append(1e3 * (time.perf_counter() - t0))
            del self._cost_ms[:-32]
        except Exception as exc:
            self.guard.failed(exc)

    def _optimizer_name(self, optimizer: Any) -> str:
        if optimizer not in self._optimizer_ids:
            self._optimizer_ids[optimizer] = len(self._optimizer_ids)
        return f"{type(optimizer).__name__}#{self._optimizer_ids[optimizer]}"

    def _sample(self, optimizer: Any) -> None:
        torch = loaded_module("torch")
        if torch is None:
            return
        step = self._steps
        name = self._optimizer_name(optimizer)
        readings: list[tuple[str, _Group, dict[str, Any], list[Any], list[Any], list[Any]]] = []
        for index, group in enumerate(optimizer.param_groups[: self.config.max_groups]):
            params = [p for p in group.get("params", [])[: self.config.max_tensors_per_group] if p.requires_grad]
            if not params:
                continue
            key = f"{name}/{index}"
            state = self._groups.setdefault(key, _Group())
            grads = [p.grad for p in params if p.grad is not None]
            row: dict[str, Any] = {HealthKeys.GROUP: key, HealthKeys.TENSORS: len(params),
                                   HealthKeys.LR: _number(group.get("lr")),
                                   HealthKeys.GRAD_NONE: len(params) - len(grads)}
            now_slices = [p.detach().reshape(-1)[: self.config.slice_elems].float().clone()
                          for p in _spread(params, self.config.slices_per_group)]
            readings.append((key, state, row, grads, now_slices, state.slices))
        loss, self._loss_tensor = self._loss_tensor, None
        values = _host_values(torch, readings, loss)  # the one sync
        with self._lock:
            self._samples += 1
            self._last_sample_step = step
            self._loss = values.get("loss")
            self._judge_loss(step)
            any_bad_grad = False
            for key, state, row, _grads, now_slices, _ in readings:
                norms = values["grads"][key]
                row[HealthKeys.GRAD_ZERO] = sum(1 for v in norms if v == 0.0)
                row[HealthKeys.GRAD_NONFINITE] = sum(1 for v in norms if not math.isfinite(v))
                any_bad_grad = any_bad_grad or row[HealthKeys.GRAD_NONFINITE] > 0
                ratio = values["ratios"].get(key)
                row[HealthKeys.UPDATE_RATIO] = ratio
                if ratio == 0.0:
                    state.unchanged_since = state.unchanged_since if state.unchanged_since is not None \
                        else self._previous_sample_step(key)
                elif ratio is not None:
                    state.unchanged_since = None
                lr = row[HealthKeys.LR]
                state.lr_zero_since = (state.lr_zero_since if state.lr_zero_since is not None else step) \
                    if lr == 0.0 else None
                row[HealthKeys.UNCHANGED_SINCE_STEP] = state.unchanged_since
                row[HealthKeys.LR_ZERO_SINCE_STEP] = state.lr_zero_since
                row["sampled_step"] = step
                state.slices = now_slices
                state.row = row
            if any_bad_grad:
                self._grad_bad_since = self._grad_bad_since if self._grad_bad_since is not None else step
            else:
                self._grad_bad_since = None

    def _previous_sample_step(self, key: str) -> int | None:
        row = self._groups[key].row
        value = row.get("sampled_step") if row else None
        return value if isinstance(value, int) else None

    def _judge_loss(self, step: int) -> None:
        loss = self._loss
        if loss is None:
            return
        if math.isfinite(loss):
            self._loss_bad_since = None
        elif self._loss_bad_since is None:
            self._loss_bad_since = (step, time.time())

    # --- the board ------------------------------------------------------------------------------------------

    def snapshot(self, now_s: float) -> JsonDict:
        self._arm()
        with self._lock:
            groups = [dict(g.row) for g in self._groups.values() if g.row]
            bad = self._loss_bad_since
            cost = sum(self._cost_ms) / len(self._cost_ms) if self._cost_ms else None
            return {
                PayloadKeys.STATUS: "ok",
                HealthKeys.ARMED: bool(self._handles),
                HealthKeys.STEPS: self._steps,
                HealthKeys.SAMPLES: self._samples,
                HealthKeys.LAST_SAMPLE_STEP: self._last_sample_step,
                HealthKeys.INTERVAL_S: self.config.interval_s,
                HealthKeys.GROUPS: groups,
                HealthKeys.LOSS: self._loss if self._loss is None or math.isfinite(self._loss) else str(self._loss),
                HealthKeys.LOSS_NONFINITE_SINCE_STEP: bad[0] if bad else None,
                HealthKeys.LOSS_NONFINITE_SINCE_WALL_S: bad[1] if bad else None,
                HealthKeys.GRAD_NONFINITE_SINCE_STEP: self._grad_bad_since,
                HealthKeys.SAMPLE_MS_MEAN: None if cost is None else round(cost, 3),
                PayloadKeys.HOOK_ERRORS: self.guard.errors,
            }

    def close(self) -> None:
        with self._arm_lock:
            self._closed = True
            for handle in self._handles:
                handle.remove()
            self._handles = []
            if self._backward is not None:
                cls, original = self._backward
                cls.backward = original
                self._backward = None


def _number(value: Any) -> float | None:
    try:
        number = float(value)  # a tensor lr (capturable optimizers) is read here: on the sampled step only
    except (TypeError, ValueError, RuntimeError):
        return None
    return number if math.isfinite(number) else None


def _spread(items: list[Any], n: int) -> list[Any]:
    """``n`` items spread over the list (first, last and between): a slice of every part of the model."""
    if len(items) <= n:
        return list(items)
    step = (len(items) - 1) / (n - 1)
    return [items[round(i * step)] for i in range(n)]


def _host_values(torch: Any, readings: list[Any], loss: Any) -> dict[str, Any]:
    """Gradient norms, slice ratios and the loss of one sample, brought to the host with one sync per device."""
    pieces: dict[Any, list[Any]] = {}  # device -> tensors to stack
    layout: list[tuple[str, str, Any, int]] = []  # (what, key, device, how many)

    def add(what: str, key: str, tensors: list[Any]) -> None:
        by_device: dict[Any, list[Any]] = {}
        for t in tensors:
            by_device.setdefault(t.device, []).append(t.reshape(()).float())
        for device, ts in by_device.items():
            pieces.setdefault(device, []).extend(ts)
            layout.append((what, key, device, len(ts)))

    for key, _state, _row, grads, now_slices, before in readings:
        if grads:
            add("grads", key, list(torch._foreach_norm(grads)) if _same_device(grads) else [g.norm() for g in grads])
        if before and len(before) == len(now_slices):
            moved = [torch.linalg.vector_norm(a - b) for a, b in zip(now_slices, before, strict=True)]
            base = [torch.linalg.vector_norm(b) for b in before]
            add("moved", key, [torch.stack(moved).sum()])
            add("base", key, [torch.stack(base).sum()])
    if loss is not None:
        add("loss", "", [loss.detach()])
    host: dict[Any, list[float]] = {d: torch.stack(ts).tolist() for d, ts in pieces.items()}  # the sync
    cursor = {d: 0 for d in host}
    out: dict[str, Any] = {"grads": {r[0]: [] for r in readings}, "ratios": {}}
    moved_base: dict[str, list[float]] = {}
    for what, key, device, n in layout:
        values = host[device][cursor[device]: cursor[device] + n]
        cursor[device] += n
        if what == "grads":
            out["grads"][key].extend(values)
        elif what == "loss":
            out["loss"] = values[0]
        else:
            moved_base.setdefault(key, [0.0, 0.0])[0 if what == "moved" else 1] += values[0]
    for key, (moved_norm, base_norm) in moved_base.items():
        out["ratios"][key] = moved_norm / base_norm if base_norm > 0 else (0.0 if moved_norm == 0 else math.inf)
    return out


def _same_device(tensors: list[Any]) -> bool:
    first = tensors[0]
    return all(t.device == first.device and t.dtype == first.dtype for t in tensors)
