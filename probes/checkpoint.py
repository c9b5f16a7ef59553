"""checkpoint: which ``use_reentrant`` each activation-checkpoint call site really uses, and trainable
parameters whose gradient is still None after a backward (the silent no-learning failure).

- ``use_reentrant``: ``torch.utils.checkpoint.checkpoint`` looks up ``CheckpointFunction.apply``
  (reentrant) and ``_checkpoint_without_reentrant_generator`` (non-reentrant; ``..._impl`` from torch 2.14) at call time, so wrapping
  those two catches every call however ``checkpoint`` was imported (HF's ``partial(checkpoint, ...)``
  included; wrapping the module attribute ``checkpoint`` itself misses code that imported the name, measured on
  2.13). The wrapper walks a few frames to name the caller site: ~2 us per call.
- grad None: a global optimizer step pre-hook (``register_optimizer_step_pre_hook``) runs right after
  the backward, before ``zero_grad``; it checks the optimizer's trainable params at most once per
  ``check_interval_s``. A parameter counts when its gradient was None at two checks in a row and its weights did
  not change between them (a strided fingerprint of ``fingerprint_elems`` elements, compared exactly, one device
  sync per check): a head used every other batch (multi-task, ``zero_grad(set_to_none=True)``) has no gradient
  at half the steps and still trains. Names come from models registered with ``watch_model``.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
import time
from dataclasses import dataclass
from types import FrameType
from typing import Any

from dflash_contract.board import CheckpointKeys, PayloadKeys, ProbeName
from probes._common import MAX_RECENT, HookGuard, JsonDict, fingerprint_view, loaded_module

_PROBES_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_STDLIB_WRAPPERS = (functools.__file__, contextlib.__file__)


_NON_REENTRANT = "_checkpoint_without_reentrant_generator"
_NON_REENTRANT_IMPL = "_checkpoint_without_reentrant_generator_impl"  # torch >= 2.14


def _skip_prefixes() -> tuple[str, ...]:
    torch = loaded_module("torch")
    torch_dir = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep if torch and torch.__file__ else None
    return tuple(p for p in (_PROBES_DIR, torch_dir) if p)


@dataclass(frozen=True, kw_only=True)
class Config:
    check_interval_s: float = 2.0  # grad-None check on at most one optimizer step per interval
    max_sites: int = 64
    max_params_checked: int = 20_000
    max_params_confirmed: int = 512  # grad-None parameters fingerprinted per check
    fingerprint_elems: int = 64


def caller_site(depth_limit: int = 12) -> str:
    """``file:line`` of the first frame outside torch, probes and functools: the checkpoint call site."""
    skip = _skip_prefixes()
    frame: FrameType | None = sys._getframe(2)
    for _ in range(depth_limit):
        if frame is None:
            break
        path = frame.f_code.co_filename
        if not path.startswith(skip) and path not in _STDLIB_WRAPPERS:
            return f"{_short(path)}:{frame.f_lineno}"
        frame = frame.f_back
    return "?"


def _short(path: str) -> str:
    parts = path.replace("\\", "/").split("/")
    return "/".join(parts[-2:]) if len(parts) >= 2 else path


class CheckpointProbe:
    name = "checkpoint"

    def __init__(self, config: Config) -> None:
        self.config = config
        self.guard = HookGuard()
        self._calls = {CheckpointKeys.REENTRANT: 0, CheckpointKeys.NON_REENTRANT: 0}
        self._sites: dict[tuple[str, bool], int] = {}
        self._patched: list[tuple[Any, str, Any]] = []
        self._hook_handle: Any = None
        self._models: dict[str, Any] = {}  # name -> weakly used module (only named_parameters is read)
        self._param_names: dict[int, str] = {}
        self._grad_none: list[str] = []
        self._grad_none_count = 0
        self._unconfirmed: dict[int, Any] = {}  # id -> fingerprint copy of a param without grad at the last check
        self._trainable = 0
        self._checked_steps = 0
        self._last_check_s = -float("inf")
        self._lock = threading.Lock()
        self._arm_lock = threading.Lock()  # arming runs from the board thread and from watch_model's caller
        self._closed = False
        self._arm_failed = False
        self._hook_failed = False
        self._arm()

    # --- arming: only once the program imported the torch pieces ----------------------------------

    def _arm(self) -> None:
        with self._arm_lock:  # two callers at once would wrap the wrapper and count every call twice
            if not self._closed:
                self._arm_unlocked()

    def _arm_unlocked(self) -> None:
        # Private torch names: if this torch lacks one, count it and keep the rest of the probe working.
        if not self._patched and not self._arm_failed:
            tuc = loaded_module("torch.utils.checkpoint")
            if tuc is not None:
                try:
                    self._patch_checkpoint(tuc)
                except Exception as exc:
                    self._arm_failed = True
                    self.guard.failed(exc)
        if self._hook_handle is None and not self._hook_failed:
            optim = loaded_module("torch.optim.optimizer")
            if optim is not None:
                try:
                    self._hook_handle = optim.register_optimizer_step_pre_hook(self._on_optimizer_step)
                except Exception as exc:
                    self._hook_failed = True
                    self.guard.failed(exc)

    def _patch_checkpoint(self, tuc: Any) -> None:
        apply = tuc.CheckpointFunction.apply
        # torch 2.14 calls ``_checkpoint_without_reentrant_generator_impl`` (the old name stays as a shim that
        # calls it): wrap the function ``checkpoint`` really calls, so each call counts once on every version.
        gen_name = next(n for n in (_NON_REENTRANT_IMPL, _NON_REENTRANT) if callable(getattr(tuc, n, None)))
        gen = getattr(tuc, gen_name)
        record = self._record

        def counting_apply(*args: Any, **kwargs: Any) -> Any:
            record(True)
            return apply(*args, **kwargs)

        def counting_generator(*args: Any, **kwargs: Any) -> Any:
            record(False)
            return gen(*args, **kwargs)

        # CheckpointFunction normally inherits apply from autograd.Function: remember its own, if any.
        self._patched = [
            (tuc.CheckpointFunction, "apply", vars(tuc.CheckpointFunction).get("apply")),
            (tuc, gen_name, gen),
        ]
        tuc.CheckpointFunction.apply = staticmethod(counting_apply)
        setattr(tuc, gen_name, counting_generator)

    def _record(self, reentrant: bool) -> None:
        try:
            self._calls[CheckpointKeys.REENTRANT if reentrant else CheckpointKeys.NON_REENTRANT] += 1
            key = (caller_site(), reentrant)
            if key in self._sites or len(self._sites) < self.config.max_sites:
                self._sites[key] = self._sites.get(key, 0) + 1
        except Exception as exc:  # never into the checkpointed forward
            self.guard.failed(exc)

    # --- grad None --------------------------------------------------------------------------------

    def watch_model(self, name: str, model: Any) -> None:
        with self._lock:
            self._models[name] = model
            for pname, p in model.named_parameters():
                self._param_names[id(p)] = f"{name}.{pname}" if name else pname
        # A program that names its model has imported torch's checkpoint code by now: arm at once, so its first
        # steps are counted (arming otherwise waits for the next publish, up to a second: a short run, or a
        # starved board thread on a loaded box, then missed every call).
        self._arm()

    def _on_optimizer_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        try:
            now = time.monotonic()
            if now - self._last_check_s < self.config.check_interval_s:
                return
            self._last_check_s = now
            self._check_optimizer(optimizer)
        except Exception as exc:
            self.guard.failed(exc)

    def _check_optimizer(self, optimizer: Any) -> None:
        missing: list[tuple[Any, str]] = []
        trainable = 0
        checked = 0
        for group in optimizer.param_groups:
            for i, p in enumerate(group["params"]):
                checked += 1
                if checked > self.config.max_params_checked:
                    break
                if not p.requires_grad:
                    continue
                trainable += 1
                if p.grad is None:
                    missing.append((p, self._param_names.get(id(p)) or f"param[{i}] {tuple(p.shape)}"))
        if trainable == len(missing):
            # Nothing got a gradient: a step() without any backward (e.g. a warm-up), not the failure mode.
            return
        confirmed = self._confirm(missing[: self.config.max_params_confirmed])
        with self._lock:
            self._checked_steps += 1
            self._trainable = trainable
            self._grad_none_count = len(confirmed)
            self._grad_none = confirmed[:MAX_RECENT]

    def _confirm(self, missing: list[tuple[Any, str]]) -> list[str]:
        """The names of ``missing`` parameters that were without a gradient at the last check too, and whose weights
        have not changed since: they never get one. One sync per device."""
        torch = loaded_module("torch")
        if torch is None:
            return []
        now: dict[int, Any] = {}
        for p, _name in missing:
            view = fingerprint_view(p, self.config.fingerprint_elems)
            if view is not None:
                now[id(p)] = view.clone()
        pairs = [(p, name, now[id(p)], self._unconfirmed[id(p)]) for p, name in missing
                 if id(p) in now and id(p) in self._unconfirmed
                 and self._unconfirmed[id(p)].shape == now[id(p)].shape
                 and self._unconfirmed[id(p)].device == now[id(p)].device]
        self._unconfirmed = now
        by_device: dict[Any, list[int]] = {}
        for index, (_p, _name, a, _b) in enumerate(pairs):
            by_device.setdefault(a.device, []).append(index)
        changed = [True] * len(pairs)
        for indices in by_device.values():
            flags = torch.stack([(pairs[i][2] != pairs[i][3]).any() for i in indices]).tolist()  # the sync
            for i, flag in zip(indices, flags, strict=True):
                changed[i] = bool(flag)
        return [name for (_p, name, _a, _b), moved in zip(pairs, changed, strict=True) if not moved]

    def check_model_grads(self, name: str) -> list[str]:
        """Grad-None trainable params of a watched model, for programs that call it right after backward."""
        model = self._models.get(name)
        if model is None:
            return []
        return [f"{name}.{n}" for n, p in model.named_parameters() if p.requires_grad and p.grad is None]

    def snapshot(self, now_s: float) -> JsonDict:
        self._arm()
        sites = [
            {CheckpointKeys.SITE: site, CheckpointKeys.USE_REENTRANT: reentrant, CheckpointKeys.CALLS: n}
            for (site, reentrant), n in sorted(list(self._sites.items()), key=lambda kv: -kv[1])
        ]
        return {
            PayloadKeys.STATUS: "ok",
            CheckpointKeys.ARMED: bool(self._patched),
            CheckpointKeys.CALLS: dict(self._calls),
            CheckpointKeys.SITES: sites,
            CheckpointKeys.MIXED_MODES: len({s[CheckpointKeys.USE_REENTRANT] for s in sites}) > 1,
            CheckpointKeys.GRAD_NONE_PARAMS: list(self._grad_none),
            CheckpointKeys.GRAD_NONE_COUNT: self._grad_none_count,
            CheckpointKeys.TRAINABLE_PARAMS: self._trainable,
            CheckpointKeys.CHECKED_BACKWARD_STEPS: self._checked_steps,
            CheckpointKeys.OPTIMIZER_HOOK: self._hook_handle is not None,
            CheckpointKeys.WATCHED_MODELS: sorted(self._models),
            PayloadKeys.HOOK_ERRORS: self.guard.errors,
        }

    def close(self) -> None:
        with self._arm_lock:
            self._closed = True  # a late watch_model or snapshot must not patch torch again
        tuc = sys.modules.get("torch.utils.checkpoint")
        if tuc is not None and self._patched:
            cls, _, own_apply = self._patched[0]
            if own_apply is not None:
                cls.apply = own_apply
            elif "apply" in vars(cls):
                delattr(cls, "apply")  # back to the inherited autograd.Function.apply
            _, gen_name, gen = self._patched[1]
            setattr(tuc, gen_name, gen)
        self._patched = []
        if self._hook_handle is not None:
            self._hook_handle.remove()
            self._hook_handle = None


# What the probe registry (``probes/registry.py``) reads of this module: its board name, its Config, its class.
NAME = ProbeName.CHECKPOINT
PROBE = CheckpointProbe
