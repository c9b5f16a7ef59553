"""health: is the program training at all? Read at optimizer steps, sampled about once a second.

The incident's worst bug trained nothing while the loss still printed. This probe looks where such bugs show:

- torch's *global* optimizer step hooks (``register_optimizer_step_pre_hook``, every optimizer class, no patch of
  any): each step is counted (a few ns); a step at least ``interval_s`` after the last sample is sampled, right
  after its backward and before the update. Per parameter group: how many tensors have no gradient, an all-zero
  one or a non-finite one, how many do not require grad, the learning rate; and, per tensor (up to
  ``watched_per_group`` tensors spread over the group), whether its weights changed since the previous sample
  (a fingerprint of ``fingerprint_elems`` elements strided over the tensor in as many different columns, compared
  exactly; "unchanged" counts only when the earlier sample saw no gradient, an all-zero one, or a non-zero one on a
  fingerprinted element: a dead unit or a row no batch uses has a zero gradient there while the tensor trains) and
  whether the
  optimizer's running average of squared gradients (Adam's ``exp_avg_sq``, RMSprop's ``square_avg``, ...) is
  exactly zero: a tensor whose weights do not change, or whose optimizer has never seen a non-zero gradient of
  it, does not train, whatever the rest of its group does. Steps are counted per optimizer: a group is judged over
  its own optimizer's steps (threads that each train their own model step their optimizers at their own pace);
- ``Tensor.backward`` (wrapped): the loss handed to it is kept (a detached view, no sync, ~1 us a call), each one
  replacing the last; the one before a sampled step is read with the sample. Two rarer looks from there: when a
  sample saw tensors without a gradient that do not move, the next sample walks the last loss's autograd graph
  (does it reach them at all?); and when backward runs with no optimizer step for 1 s (and three times the
  program's longest gap between steps), once a second it fingerprints the tensors that graph accumulates into (a
  step that never runs, a GradScaler that skips every step).

A step that a mixed-precision ``GradScaler`` skips inside a fused optimizer (``fused=True``: the scaler sets
``optimizer.found_inf`` and the step hook fires anyway) is read as skipped: nothing of it is judged, the next
step is sampled instead. Steps the scaler skips outside the optimizer fire no hook at all.

Cost: one sample reads every gradient's norm (``torch._foreach_norm``), copies at most ``watched_per_group`` x
``fingerprint_elems`` weights per group and the norms of their optimizer moments; everything read is brought to
the host at once, one device sync per device per sample (``sample_ms_mean`` on the board says what it cost).
Nothing else runs on the training path of a run that trains (a dict lookup and a clock read per step, a detach and
a clock read per backward). What the readings mean is judged in ``dflash_contract.health`` (one
logic for the findings of ``doctor`` and the alerts the program publishes).
"""

from __future__ import annotations

import math
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any

from dflash_contract.board import HealthKeys, PayloadKeys, ProbeName
from dflash_contract.health import MIN_STEPS, STUCK_SHARE
from probes._common import HookGuard, JsonDict, fingerprint_view, loaded_module

# The optimizer state that holds a running average of squared (or absolute) gradients: exactly zero only if every
# gradient the optimizer has seen for that tensor was zero.
_MOMENT_KEYS = ("exp_avg_sq", "square_avg", "sum", "exp_inf", "momentum_buffer")
_EXAMPLES = 3
# What a watched tensor's gradient was where its fingerprint lies, at a sample: unchanged weights at the next sample
# mean "not trained" only when the step after this one had something to apply there.
GRAD_NONE = "none"  # no gradient: the optimizer skips the tensor (weight decay too)
GRAD_ZERO = "zero"  # an all-zero gradient (the whole tensor)
GRAD_HIT = "hit"  # a non-zero gradient on at least one fingerprinted element: the step moves it
GRAD_MISS = "miss"  # a gradient, zero on every fingerprinted element (a dead unit, an unused row): no evidence
GRAD_UNKNOWN = "unknown"  # a gradient whose layout differs from the weight's: no evidence
GRAD_SEEN = "seen"  # a gradient was read (hit or miss: known once its values reach the host)
IDLE_AFTER_S = 1.0  # backward runs and no optimizer stepped for this long: look whether anything trains


@dataclass(frozen=True, kw_only=True)
class Config:
    interval_s: float = 1.0  # at most one sampled step per interval
    max_groups: int = 32
    max_tensors_per_group: int = 20_000  # gradients read per group
    watched_per_group: int = 512  # tensors whose weights are fingerprinted, spread over the group
    fingerprint_elems: int = 64  # elements per fingerprint, strided over the tensor


@dataclass
class _Group:
    """What the probe remembers of one parameter group between samples."""

    layout: tuple[int, ...] = ()  # ids of the watched tensors, in order: a new layout starts afresh
    prints: dict[Any, Any] = field(default_factory=dict)  # (device, dtype) -> concatenated fingerprints
    views: dict[int, tuple[int, Any]] = field(default_factory=dict)  # id -> (data_ptr, fingerprint view)
    segments: dict[Any, Any] = field(default_factory=dict)  # (device, dtype) -> element -> watched tensor index
    quiet_since: list[int | None] = field(default_factory=list)  # per watched tensor: weights unchanged since
    zero_since: list[int | None] = field(default_factory=list)  # per watched tensor: optimizer moment zero since
    # Per watched tensor whose moment was zero when first seen so: the steps its optimizer had already applied to it
    # by then (its own count, Adam's ``state["step"]``; 0 where the optimizer keeps none). A zero moment means every
    # one of those steps had a zero gradient: attached to a program that has trained a while, that history is
    # evidence at once, not after MIN_STEPS more steps (which a slow box may not reach in a short window).
    zero_before: list[int] = field(default_factory=list)
    zero_grad: set[int] = field(default_factory=set)  # watched slots whose gradient was all zero at the last sample
    # Per watched tensor, what its gradient was at the last sample where the fingerprint lies (GRAD_*): whether
    # weights found unchanged at the next sample say anything.
    grad_at_print: list[str] = field(default_factory=list)
    none_grad: set[int] = field(default_factory=set)  # slots without gradient and unchanged: what may not train
    row: dict[str, Any] = field(default_factory=dict)  # the last published reading
    unchanged_since: int | None = None
    lr_zero_since: int | None = None
    frozen_since: int | None = None


@dataclass
class _Idle:
    """Backward runs without optimizer steps: what the looks at the loss's tensors found, since the first."""

    ids: tuple[int, ...]
    since_wall_s: float
    since_s: float  # monotonic
    since_backwards: int
    prints: list[Any] = field(default_factory=list)
    samples: int = 0
    leaves: int = 0
    unchanged: int | None = None  # of the leaves, unchanged since the previous look (None: no comparison yet)
    cleared: bool = True  # their gradients were None or zero at every look (cleared each iteration)
    backwards: int = 0
    seconds: float = 0.0
    loss: float | None = None  # the loss handed to the last look's backward()


@dataclass
class _Reading:
    """One group's tensors at a sample, before the sync."""

    key: str
    state: _Group
    row: dict[str, Any]
    params: list[Any]  # the group's trainable tensors
    grads: list[Any]
    grad_of: list[int]  # per trainable tensor: index into grads, or -1 (None)
    watched: list[int]  # indices into params
    prints: dict[Any, list[Any]]  # (device, dtype) -> fingerprint views, in watched order within the key
    print_slots: dict[Any, list[int]]  # (device, dtype) -> positions in ``watched``
    moments: list[Any]  # per watched tensor: its moment tensor or None
    moment_steps: list[Any]  # per watched tensor whose moment is read: its optimizer's step count for it, or None
    grad_prints: dict[Any, list[Any]]  # (device, dtype) -> the gradient's values where the fingerprints lie
    grad_state: list[str]  # per watched tensor: GRAD_NONE, GRAD_ZERO (decided on the host), GRAD_SEEN or GRAD_UNKNOWN


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
        self._amp_skipped = 0
        self._last_sample_step: int | None = None
        self._due_s: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()  # per optimizer
        # Steps per optimizer: a group is judged over its own optimizer's steps. Counted process-wide, two threads'
        # optimizers made "10 steps" pass in half the steps of each, and one unlucky comparison was already a
        # finding.
        self._steps_of: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        self._loss_tensor: Any = None
        self._loss_graph: Any = None  # the last loss itself (its autograd graph), kept only while _want_graph
        self._backwards = 0
        self._last_step_s = time.monotonic()  # the last optimizer step (or the probe's start)
        self._max_step_gap_s = 0.0
        self._idle: _Idle | None = None  # backward() runs and no optimizer steps: what the loss depends on
        self._idle_due_s = 0.0
        self._want_graph = False  # a tensor had no gradient at the last sample: is it in the loss's graph?
        self._loss: float | None = None
        self._loss_bad_since: tuple[int, float] | None = None
        self._grad_bad_since: int | None = None
        self._groups: dict[str, _Group] = {}
        self._owners: dict[str, Any] = {}  # group key -> weakref to its optimizer: a dead one's groups are dropped
        self._optimizer_ids: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        self._optimizers_seen = 0
        self._param_names: dict[int, str] = {}
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
        """Name ``model``'s tensors in the evidence (``model.layers.0.weight``); and arm: a program that names its
        model has imported torch.optim by now."""
        names = {id(p): f"{name}.{pname}" if name else pname for pname, p in model.named_parameters()}
        with self._lock:
            self._param_names.update(names)
        self._arm()

    # --- on the training threads ------------------------------------------------------------------------------

    def _note_loss(self, tensor: Any) -> None:
        try:
            # The last loss before the sampled step is the one read: each backward replaces the one kept (a detached
            # view, ~1 us, no sync), so a backward whose step a GradScaler skips (no hook fires) leaves nothing
            # behind, and a sample that falls due between a backward and its step still has that step's loss.
            if getattr(tensor, "numel", lambda: 0)() == 1:
                self._loss_tensor = tensor.detach()
                if self._want_graph:  # rare: only after a sample saw tensors without a gradient
                    self._loss_graph = tensor
            self._backwards += 1
            now = time.monotonic()
            if now - self._last_step_s >= max(IDLE_AFTER_S, 3 * self._max_step_gap_s) and now >= self._idle_due_s:
                # No optimizer step for longer than this program pauses between steps, though backward runs (a step
                # that never comes, a GradScaler that skips them all): once an interval, does anything the loss
                # depends on change? (A trainer whose steps take seconds looks only after three such gaps.)
                self._idle_due_s = now + self.config.interval_s
                self._idle_sample(tensor)
        except Exception as exc:  # never into the program's backward
            self.guard.failed(exc)

    def _on_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        try:
            self._steps += 1
            self._steps_of[optimizer] = self._steps_of.get(optimizer, 0) + 1
            now = time.monotonic()
            if self._steps > 1:  # the longest gap between two steps: a pause that long is this program's normal
                self._max_step_gap_s = max(self._max_step_gap_s, now - self._last_step_s)
            self._last_step_s = now
            if self._idle is not None:
                self._idle = None  # it steps again
            if now < self._due_s.get(optimizer, 0.0):  # an optimizer not seen before is due at once
                return
            # Each optimizer is sampled once an interval (a GAN's two optimizers, a trainer with one per model).
            self._due_s[optimizer] = now + self.config.interval_s
            t0 = time.perf_counter()
            if not self._sample(optimizer):  # a step skipped inside the optimizer: sample its next one instead
                self._due_s[optimizer] = 0.0
            self._cost_ms.append(1e3 * (time.perf_counter() - t0))
            del self._cost_ms[:-32]
        except Exception as exc:
            self.guard.failed(exc)

    def _optimizer_name(self, optimizer: Any) -> str:
        with self._lock:  # two threads' first steps at once must not give their optimizers one name (one group)
            if optimizer not in self._optimizer_ids:
                self._optimizer_ids[optimizer] = self._optimizers_seen  # never reused: a new optimizer, a new name
                self._optimizers_seen += 1
            return f"{type(optimizer).__name__}#{self._optimizer_ids[optimizer]}"

    def _sample(self, optimizer: Any) -> bool:
        """Read one step; False when a GradScaler skips it inside the optimizer (nothing judged)."""
        torch = loaded_module("torch")
        if torch is None:
            return True
        step = self._steps
        own_step = self._steps_of.get(optimizer, step)  # this optimizer's own steps: what its groups are judged over
        name = self._optimizer_name(optimizer)
        self._forget_dead_optimizers()
        readings = [self._read_group(f"{name}/{index}", group, optimizer)
                    for index, group in enumerate(optimizer.param_groups[: self.config.max_groups])]
        found_inf = getattr(optimizer, "found_inf", None)  # GradScaler's fused path: this step may be skipped
        loss = self._loss_tensor
        graph, self._loss_graph = self._loss_graph, None
        # Which tensors the last loss depends on (its graph's leaves), when it can say something: one optimizer in
        # the process (with two, the last loss may be the other model's).
        in_graph = _graph_leaves(graph) if graph is not None and len(self._optimizer_ids) == 1 else None
        values = _host_values(torch, readings, loss, found_inf if _is_tensor(torch, found_inf) else None)  # sync
        if values.get("found_inf"):
            with self._lock:
                self._amp_skipped += 1
            return False
        self._loss_tensor = None
        with self._lock:
            self._samples += 1
            self._last_sample_step = step
            self._loss = values.get("loss")
            self._judge_loss(step)
            any_bad_grad = False
            for r in readings:
                self._judge_group(r, values, own_step, in_graph)
                any_bad_grad = any_bad_grad or bool(r.row.get(HealthKeys.GRAD_NONFINITE))
            self._want_graph = any(g.none_grad for g in self._groups.values())
            if any_bad_grad:
                self._grad_bad_since = self._grad_bad_since if self._grad_bad_since is not None else step
            else:
                self._grad_bad_since = None
        return True

    def _idle_sample(self, loss: Any) -> None:
        """Backward runs, no optimizer steps: fingerprint the tensors the loss accumulates gradients into (before
        this backward: are their gradients cleared each time, as when each iteration calls zero_grad?) and compare
        with the last such look. Only in a process that built a torch.optim optimizer (not attribution or attacks
        on inputs, where backward never meant an update)."""
        torch = loaded_module("torch")
        if torch is None or not _optimizer_built(torch):
            return
        leaves = _graph_leaf_tensors(loss)
        watched = [leaves[i] for i in _spread(len(leaves), self.config.watched_per_group)] if leaves else []
        grads = [p.grad for p in watched if p.grad is not None]
        views = [(p, v) for p in watched if (v := fingerprint_view(p, self.config.fingerprint_elems)) is not None]
        prints = [v.detach().float().clone() for _, v in views]
        ids = tuple(id(p) for p, _ in views)
        previous = self._idle
        values: list[float] = []
        if previous is not None and previous.ids == ids and prints:
            moved = [(a != b).any() for a, b in zip(prints, previous.prints, strict=True)]
            by_device: dict[Any, list[Any]] = {}
            for flag in moved:
                by_device.setdefault(flag.device, []).append(flag.float())
            for ts in by_device.values():
                values.extend(torch.stack(ts).tolist())  # one sync per device, once an interval while idle
        loss_value = float(loss.detach().reshape(())) if loss.numel() == 1 else None  # a sync, once an interval
        zero = True
        if grads:
            norms = _norms(torch, grads)
            zero = all(v == 0.0 for v in (norms.tolist() if not isinstance(norms, list) else map(float, norms)))
        now = time.monotonic()
        with self._lock:
            idle = previous if previous is not None and previous.ids == ids else _Idle(
                ids=ids, since_wall_s=time.time(), since_s=now, since_backwards=self._backwards)
            idle.prints = prints
            idle.samples += 1
            idle.leaves = len(ids)
            idle.unchanged = sum(1 for v in values if v == 0.0) if values else None
            idle.cleared = idle.cleared and (not grads or zero)  # every look found them None or zero
            idle.backwards = self._backwards - idle.since_backwards
            idle.seconds = now - idle.since_s
            idle.loss = loss_value
            self._idle = idle

    def _forget_dead_optimizers(self) -> None:
        """Drop the groups of optimizers that are gone (their rows, and the weight views that would keep their
        tensors' memory alive)."""
        dead = [key for key, ref in self._owners.items() if ref() is None]
        if dead:
            with self._lock:
                for key in dead:
                    self._groups.pop(key, None)
                    self._owners.pop(key, None)

    def _read_group(self, key: str, group: Any, optimizer: Any) -> _Reading:
        every = group.get("params", [])[: self.config.max_tensors_per_group]
        params = [p for p in every if p.requires_grad]
        if key not in self._groups:
            with self._lock:
                self._groups[key] = _Group()
                self._owners[key] = weakref.ref(optimizer)
        state = self._groups[key]
        grads: list[Any] = []
        grad_of: list[int] = []
        for p in params:
            if p.grad is None:
                grad_of.append(-1)
            else:
                grad_of.append(len(grads))
                grads.append(p.grad)
        row: dict[str, Any] = {HealthKeys.GROUP: key, HealthKeys.TENSORS: len(params),
                               HealthKeys.FROZEN: len(every) - len(params), HealthKeys.LR: _number(group.get("lr")),
                               HealthKeys.GRAD_NONE: len(params) - len(grads)}
        watched = _spread(len(params), self.config.watched_per_group)
        prints: dict[Any, list[Any]] = {}
        grad_prints: dict[Any, list[Any]] = {}
        grad_state: list[str] = []
        slots: dict[Any, list[int]] = {}
        moments: list[Any] = []
        moment_steps: list[Any] = []
        opt_state = getattr(optimizer, "state", {})
        views = state.views
        for slot, i in enumerate(watched):
            p = params[i]
            ptr = p.data_ptr()
            cached = views.get(id(p))
            if cached is None or cached[0] != ptr:  # a view of its memory, rebuilt when `.data` is replaced
                cached = views[id(p)] = (ptr, fingerprint_view(p, self.config.fingerprint_elems))
            view = cached[1]
            grad_state.append(GRAD_NONE if p.grad is None else GRAD_UNKNOWN)
            if view is not None:
                k = (view.device, view.dtype)
                prints.setdefault(k, []).append(view)
                slots.setdefault(k, []).append(slot)
                # The gradient where the fingerprint lies (the same positions: same shape, same layout), read with
                # it: the step that follows this sample applies it there.
                grad_view = _grad_view(p, view, self.config.fingerprint_elems)
                if grad_view is not None:
                    grad_state[slot] = GRAD_SEEN
                grad_prints.setdefault(k, []).append(grad_view if grad_view is not None else view.new_zeros(view.shape))
            # The optimizer's moment is read (a pass over it) only for a tensor whose gradient was zero at the last
            # sample: what could be a tensor that never trains; a healthy run reads none.
            moments.append(_moment(opt_state.get(p)) if slot in state.zero_grad else None)
            moment_steps.append(_state_steps(opt_state.get(p)) if moments[-1] is not None else None)
        return _Reading(key=key, state=state, row=row, params=params, grads=grads, grad_of=grad_of, watched=watched,
                        prints=prints, print_slots=slots, moments=moments, moment_steps=moment_steps,
                        grad_prints=grad_prints,
                        grad_state=grad_state)

    def _judge_group(self, r: _Reading, values: dict[str, Any], step: int, in_graph: set[int] | None) -> None:
        """Fold one group's sample into what the probe remembers of it (under the lock)."""
        state, row = r.state, r.row
        norms = values["grads"].get(r.key, [])
        row[HealthKeys.GRAD_ZERO] = sum(1 for v in norms if v == 0.0)
        row[HealthKeys.GRAD_NONFINITE] = sum(1 for v in norms if not math.isfinite(v))
        lr = row[HealthKeys.LR]
        state.lr_zero_since = (state.lr_zero_since if state.lr_zero_since is not None else step) \
            if lr == 0.0 else None
        state.frozen_since = (state.frozen_since if state.frozen_since is not None else step) \
            if not r.params and row[HealthKeys.FROZEN] else None
        previous = state.row.get(HealthKeys.SAMPLED_STEP) if state.row else None  # this group's own last sample
        layout = tuple(id(r.params[i]) for i in r.watched)
        if layout != state.layout:  # new or changed tensors: nothing to compare them with yet
            state.layout = layout
            state.quiet_since = [None] * len(layout)
            state.zero_since = [None] * len(layout)
            state.zero_before = [0] * len(layout)
            state.zero_grad = set()
            state.none_grad = set()
            state.segments = {}
            alive = set(layout)
            state.views = {k: v for k, v in state.views.items() if k in alive}
            changed: list[bool | None] = [None] * len(layout)
            ratio = None
        else:
            changed = values["changed"].get(r.key, [None] * len(layout))
            ratio = values["ratios"].get(r.key)
        state.prints = values["prints"].get(r.key, {})
        moment_zero = values["moment_zero"].get(r.key, [None] * len(layout))
        moment_steps = values["moment_steps"].get(r.key, [None] * len(layout))
        grad_before = state.grad_at_print if len(state.grad_at_print) == len(layout) else [GRAD_UNKNOWN] * len(layout)
        for slot in range(len(layout)):
            moved = changed[slot]
            if moved is False and grad_before[slot] in (GRAD_MISS, GRAD_UNKNOWN):
                # The step after the last sample had nothing to apply where the fingerprint looks (its gradient was
                # zero there, the rest of the tensor's not): unchanged there says nothing about the tensor.
                state.quiet_since[slot] = None
            elif moved is False:
                if state.quiet_since[slot] is None:
                    state.quiet_since[slot] = previous if previous is not None else step
            elif moved is True:
                state.quiet_since[slot] = None
            zero = moment_zero[slot]
            if not zero:
                state.zero_since[slot] = None
            elif state.zero_since[slot] is None:
                state.zero_since[slot] = step
                state.zero_before[slot] = moment_steps[slot] or 0
        state.grad_at_print = _grad_at_print(r, norms, values["grad_hits"].get(r.key, [None] * len(layout)))
        self._stuck_fields(r, norms, step, in_graph)
        state.zero_grad = {slot for slot, i in enumerate(r.watched)
                           if 0 <= r.grad_of[i] < len(norms) and norms[r.grad_of[i]] == 0.0}
        # Tensors without a gradient whose weights stay put, holding enough of the group to become a finding: the
        # next sample walks the loss's graph to say whether it reaches them (a healthy run never walks it).
        quiet_none = [slot for slot, i in enumerate(r.watched)
                      if r.grad_of[i] < 0 and state.quiet_since[slot] is not None]
        numel = row.get(HealthKeys.WATCHED_NUMEL) or 0
        share = sum(int(r.params[r.watched[slot]].numel()) for slot in quiet_none) / numel if numel else 0.0
        state.none_grad = set(quiet_none) if share >= STUCK_SHARE else set()
        row[HealthKeys.UPDATE_RATIO] = ratio
        quiet = [s for s in state.quiet_since if s is not None]
        state.unchanged_since = max(quiet) if quiet and len(quiet) == len(layout) else None
        row[HealthKeys.UNCHANGED_SINCE_STEP] = state.unchanged_since
        row[HealthKeys.LR_ZERO_SINCE_STEP] = state.lr_zero_since
        row[HealthKeys.FROZEN_SINCE_STEP] = state.frozen_since
        row[HealthKeys.SAMPLED_STEP] = step
        state.row = row

    def _stuck_fields(self, r: _Reading, norms: list[float], step: int, in_graph: set[int] | None) -> None:
        """The watched tensors that do not train (weights unchanged, or a zero optimizer moment, for at least
        MIN_STEPS steps), counted with their sizes, what their gradient is now (and, for those without one, whether
        the last loss depends on them at all), and a few names."""
        state, row = r.state, r.row
        watched_numel = stuck_numel = stuck = none = zero = none_in_graph = 0
        since: int | None = None
        examples: list[str] = []
        for slot, i in enumerate(r.watched):
            p = r.params[i]
            numel = int(p.numel())
            watched_numel += numel
            zero_since = state.zero_since[slot]
            # A zero moment counts the steps its optimizer applied before it was first seen too (<= 0: before the
            # probe's first step, attached to a running program)
            zero_start = None if zero_since is None else zero_since - state.zero_before[slot]
            starts = [s for s in (state.quiet_since[slot], zero_start) if s is not None and step - s >= MIN_STEPS]
            if not starts:
                continue
            stuck += 1
            stuck_numel += numel
            since = min(starts) if since is None else min(since, *starts)
            g = r.grad_of[i]
            if g < 0:
                none += 1
                none_in_graph += int(in_graph is not None and id(p) in in_graph)
            elif g < len(norms) and norms[g] == 0.0:
                zero += 1
            if len(examples) < _EXAMPLES:
                examples.append(self._param_names.get(id(p)) or f"tensor {i} {tuple(p.shape)}")
        row[HealthKeys.WATCHED_TENSORS] = len(r.watched)
        row[HealthKeys.WATCHED_NUMEL] = watched_numel
        row[HealthKeys.STUCK_TENSORS] = stuck
        row[HealthKeys.STUCK_NUMEL] = stuck_numel
        row[HealthKeys.STUCK_SINCE_STEP] = since
        row[HealthKeys.STUCK_GRAD_NONE] = none
        row[HealthKeys.STUCK_GRAD_ZERO] = zero
        row[HealthKeys.STUCK_NONE_IN_GRAPH] = none_in_graph if in_graph is not None and none else None
        row[HealthKeys.STUCK_EXAMPLES] = examples

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
                HealthKeys.AMP_SKIPPED: self._amp_skipped,
                HealthKeys.LAST_SAMPLE_STEP: self._last_sample_step,
                HealthKeys.INTERVAL_S: self.config.interval_s,
                HealthKeys.GROUPS: groups,
                HealthKeys.LOSS: _finite_or_name(self._loss),
                HealthKeys.LOSS_NONFINITE_SINCE_STEP: bad[0] if bad else None,
                HealthKeys.LOSS_NONFINITE_SINCE_WALL_S: bad[1] if bad else None,
                HealthKeys.GRAD_NONFINITE_SINCE_STEP: self._grad_bad_since,
                HealthKeys.BACKWARDS: self._backwards,
                HealthKeys.NO_STEP: None if self._idle is None or self._idle.unchanged is None else {
                    HealthKeys.NO_STEP_SINCE_WALL_S: self._idle.since_wall_s,
                    HealthKeys.NO_STEP_SECONDS: round(self._idle.seconds, 1),
                    HealthKeys.NO_STEP_BACKWARDS: self._idle.backwards,
                    HealthKeys.NO_STEP_TENSORS: self._idle.leaves,
                    HealthKeys.NO_STEP_UNCHANGED: self._idle.unchanged,
                    HealthKeys.NO_STEP_CLEARED: self._idle.cleared,
                    HealthKeys.NO_STEP_LOSS: _finite_or_name(self._idle.loss),
                    HealthKeys.NO_STEP_LONGEST_GAP_S: round(self._max_step_gap_s, 3)},
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


def _finite_or_name(value: float | None) -> float | str | None:
    """A float as JSON carries it: a non-finite one by its name ("nan", "inf")."""
    return value if value is None or math.isfinite(value) else str(value)


def _is_tensor(torch: Any, value: Any) -> bool:
    return isinstance(value, torch.Tensor)


def _spread(n: int, k: int) -> list[int]:
    """``k`` indices spread over ``range(n)`` (first, last and between): every part of the model."""
    if n <= k:
        return list(range(n))
    step = (n - 1) / (k - 1)
    return sorted({round(i * step) for i in range(k)})


def _optimizer_built(torch: Any) -> bool:
    """Whether the process built a torch.optim optimizer: ``Optimizer.__init__`` wraps its class's ``step`` once
    and marks it ``hooked`` (torch >= 2.0)."""
    pending = list(torch.optim.Optimizer.__subclasses__())
    seen = 0
    while pending and seen < 1000:
        cls = pending.pop()
        seen += 1
        if getattr(vars(cls).get("step"), "hooked", False):
            return True
        pending.extend(cls.__subclasses__())
    return False


def _graph_leaf_tensors(loss: Any, max_nodes: int = 50_000) -> list[Any]:
    """The tensors a loss's autograd graph accumulates gradients into, in graph order (bounded walk)."""
    root = getattr(loss, "grad_fn", None)
    seen: set[int] = set()
    leaves: list[Any] = []
    stack = [root] if root is not None else []
    while stack and len(seen) < max_nodes:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        variable = getattr(node, "variable", None)
        if variable is not None:
            leaves.append(variable)
        stack.extend(child for child, _ in node.next_functions)
    return leaves


def _graph_leaves(loss: Any, max_nodes: int = 50_000) -> set[int] | None:
    """The ids of the tensors a loss's autograd graph accumulates gradients into (its AccumulateGrad leaves); None
    when the graph is larger than ``max_nodes`` (not walked to the end: no claim from it). Read after the backward:
    the graph's nodes outlive it (only their saved tensors are freed)."""
    root = getattr(loss, "grad_fn", None)
    if root is None:
        return set()
    seen: set[int] = set()
    leaves: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        if len(seen) >= max_nodes:
            return None
        seen.add(id(node))
        variable = getattr(node, "variable", None)
        if variable is not None:
            leaves.add(id(variable))
        stack.extend(child for child, _ in node.next_functions)
    return leaves


def _state_steps(state: Any) -> Any:
    """The steps an optimizer has applied to one tensor by its own count (Adam's ``state["step"]``: a number or a
    0-d tensor, read with the sample's sync), or None where it keeps none (SGD)."""
    value = state.get("step") if isinstance(state, dict) else None
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return int(value) if math.isfinite(value) and value >= 0 else None
    return value if hasattr(value, "reshape") and getattr(value, "numel", lambda: 0)() == 1 else None


def _moment(state: Any) -> Any:
    """The optimizer's running average of squared gradients for one tensor (None: it keeps none)."""
    if not isinstance(state, dict):
        return None
    for key in _MOMENT_KEYS:
        value = state.get(key)
        if value is not None and hasattr(value, "norm"):
            return value
    return None


def _host_values(torch: Any, readings: list[_Reading], loss: Any, found_inf: Any) -> dict[str, Any]:
    """Gradient norms, which watched tensors moved, their optimizer moments, the loss and the scaler's found_inf of
    one sample, brought to the host with one sync per device."""
    pieces: dict[Any, list[Any]] = {}  # device -> 1-D float tensors to concatenate
    layout: list[tuple[str, str, Any, Any, int]] = []  # (what, group key, extra, device, how many)

    def add(what: str, key: str, extra: Any, values: Any) -> None:
        """Queue values to bring to the host: a 1-D tensor (on one device), or a list of 0-d tensors (any)."""
        if isinstance(values, list):
            by_device: dict[Any, list[Any]] = {}
            for t in values:
                by_device.setdefault(t.device, []).append(t.float())
            vectors = [torch.stack(ts) for ts in by_device.values()]
        else:
            vectors = [values.float()]
        for v in vectors:
            pieces.setdefault(v.device, []).append(v)
            layout.append((what, key, extra, v.device, int(v.numel())))

    out: dict[str, Any] = {"grads": {}, "ratios": {}, "changed": {}, "moment_zero": {}, "moment_steps": {},
                           "prints": {}, "grad_hits": {}}
    for r in readings:
        out["grads"][r.key] = []
        if r.grads:
            add("grads", r.key, None, _norms(torch, r.grads))
        prints: dict[Any, Any] = {}
        same_layout = r.state.layout == tuple(id(r.params[i]) for i in r.watched)
        for k, views in r.print_slots.items():
            now = torch.cat(r.prints[k]).float()  # the copy: a snapshot of the watched weights
            prints[k] = now
            segment = r.state.segments.get(k)
            if segment is None or segment.shape != now.shape or not same_layout:
                lengths = torch.tensor([int(v.numel()) for v in r.prints[k]], device=now.device)
                segment = r.state.segments[k] = torch.repeat_interleave(
                    torch.arange(len(views), device=now.device), lengths)
            # Per watched tensor: how many fingerprinted elements have a non-zero gradient now (the next step moves
            # them), judged at the next sample.
            hits = torch.zeros(len(views), device=now.device).index_add_(
                0, segment, (torch.cat(r.grad_prints[k]) != 0).float())
            add("grad_hits", r.key, k, hits)
            before = r.state.prints.get(k)
            if before is None or before.shape != now.shape or not same_layout:
                continue
            moved = torch.zeros(len(views), device=now.device).index_add_(0, segment, (now != before).float())
            add("changed", r.key, k, moved)
            add("moved", r.key, None, [torch.linalg.vector_norm(now - before)])
            add("base", r.key, None, [torch.linalg.vector_norm(before)])
        out["prints"][r.key] = prints
        present = [m for m in r.moments if m is not None]
        if present:
            add("moments", r.key, None, _norms(torch, present))
        counted = [c.detach().reshape(()) for c in r.moment_steps if _is_tensor(torch, c)]
        if counted:
            add("moment_steps", r.key, None, counted)
    if loss is not None:
        add("loss", "", None, [loss.detach().reshape(())])
    if found_inf is not None:
        add("found_inf", "", None, [found_inf.detach().reshape(())])
    host: dict[Any, list[float]] = {d: torch.cat(vs).tolist() for d, vs in pieces.items()}  # the sync
    cursor = {d: 0 for d in host}
    moved_base: dict[str, list[float]] = {}
    changed_by_key: dict[str, dict[Any, list[float]]] = {}
    hits_by_key: dict[str, dict[Any, list[float]]] = {}
    moments_by_key: dict[str, list[float]] = {}
    steps_by_key: dict[str, list[float]] = {}
    for what, key, extra, device, n in layout:
        values = host[device][cursor[device]: cursor[device] + n]
        cursor[device] += n
        if what == "grads":
            out["grads"][key].extend(values)
        elif what == "loss":
            out["loss"] = values[0]
        elif what == "found_inf":
            out["found_inf"] = values[0] > 0
        elif what == "changed":
            changed_by_key.setdefault(key, {})[extra] = values
        elif what == "grad_hits":
            hits_by_key.setdefault(key, {})[extra] = values
        elif what == "moments":
            moments_by_key.setdefault(key, []).extend(values)
        elif what == "moment_steps":
            steps_by_key.setdefault(key, []).extend(values)
        else:
            moved_base.setdefault(key, [0.0, 0.0])[0 if what == "moved" else 1] += values[0]
    for key, (moved_norm, base_norm) in moved_base.items():
        out["ratios"][key] = moved_norm / base_norm if base_norm > 0 else (0.0 if moved_norm == 0 else math.inf)
    for r in readings:
        per_key = changed_by_key.get(r.key)
        if per_key is not None:
            changed: list[bool | None] = [None] * len(r.watched)
            for k, counts in per_key.items():
                for slot, count in zip(r.print_slots[k], counts, strict=True):
                    changed[slot] = count > 0
            out["changed"][r.key] = changed
        hit: list[bool | None] = [None] * len(r.watched)
        for k, counts in hits_by_key.get(r.key, {}).items():
            for slot, count in zip(r.print_slots[k], counts, strict=True):
                hit[slot] = count > 0
        out["grad_hits"][r.key] = hit
        moment_norms = iter(moments_by_key.get(r.key, []))
        out["moment_zero"][r.key] = [None if m is None else next(moment_norms) == 0.0 for m in r.moments]
        counts = iter(steps_by_key.get(r.key, []))
        out["moment_steps"][r.key] = [_count(next(counts)) if _is_tensor(torch, c) else c for c in r.moment_steps]
    return out


def _count(value: float) -> int | None:
    """A step count read from a tensor (a float on the host): None when it is not one."""
    return int(value) if math.isfinite(value) and value >= 0 else None


def _grad_at_print(r: _Reading, norms: list[float], hits: list[bool | None]) -> list[str]:
    """Per watched tensor, its gradient where its fingerprint lies at this sample (GRAD_*)."""
    out = []
    for slot, i in enumerate(r.watched):
        g = r.grad_of[i]
        if g < 0:
            out.append(GRAD_NONE)
        elif g < len(norms) and norms[g] == 0.0:
            out.append(GRAD_ZERO)
        elif r.grad_state[slot] == GRAD_SEEN and hits[slot] is not None:
            out.append(GRAD_HIT if hits[slot] else GRAD_MISS)
        else:
            out.append(GRAD_UNKNOWN)
    return out


def _grad_view(param: Any, view: Any, elems: int) -> Any:
    """The gradient of ``param`` at the elements ``view`` fingerprints (a view, no copy), or None when its layout
    differs (another shape, a sparse or non-contiguous gradient): then nothing says where it is non-zero."""
    grad = param.grad
    if grad is None or getattr(grad, "is_sparse", False) or grad.shape != param.shape or grad.device != view.device:
        return None
    grad_print = fingerprint_view(grad, elems)
    return grad_print if grad_print is not None and grad_print.shape == view.shape else None


def _norms(torch: Any, tensors: list[Any]) -> Any:
    """The norm of each tensor: one 1-D tensor (foreach kernels) when they share a device and dtype, else a list."""
    if _same_device(tensors):
        return torch.stack(torch._foreach_norm(tensors))
    return [t.norm() for t in tensors]


def _same_device(tensors: list[Any]) -> bool:
    first = tensors[0]
    return all(t.device == first.device and t.dtype == first.dtype for t in tensors)


# What the probe registry (``probes/registry.py``) reads of this module: its board name, its Config, its class.
NAME = ProbeName.HEALTH
PROBE = HealthProbe
