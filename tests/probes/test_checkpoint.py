"""checkpoint: use_reentrant per call site, and grad-None params after a backward (the no-learning bug)."""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable

import pytest
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint  # imported by name, as HF does: the probe must still see it

from probes.checkpoint import CheckpointProbe, Config


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.inner(x))


class Model(nn.Module):
    def __init__(self, ckpt) -> None:
        super().__init__()
        self.block = Block()
        self.head = nn.Linear(8, 1)
        self.ckpt = ckpt

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        # hidden states from a frozen target do not require grad: reentrant checkpoint then drops the grads
        return self.head(self.ckpt(self.block, hidden)).sum()


@pytest.fixture
def probe():
    p = CheckpointProbe(Config(check_interval_s=0.0))
    yield p
    p.close()


def _train_step(model: nn.Module, probe: CheckpointProbe, steps: int = 2) -> None:
    """``steps`` steps: a parameter counts once it had no gradient at two checks in a row (and did not change)."""
    probe.watch_model("drafter", model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        model(torch.randn(4, 8)).backward()
        opt.step()


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_reentrant_keyword_call_leaves_block_params_without_grad(probe: CheckpointProbe) -> None:
    # HF style: functools.partial(checkpoint, use_reentrant=True), a keyword argument
    model = Model(functools.partial(checkpoint, use_reentrant=True))
    _train_step(model, probe)
    reading = probe.snapshot(0.0)
    assert reading["calls"] == {"reentrant": 2, "non_reentrant": 0}
    assert reading["sites"][0]["use_reentrant"] is True
    lines, first = inspect.getsourcelines(Model.forward)
    call_line = first + next(i for i, text in enumerate(lines) if "self.ckpt(self.block" in text)
    assert reading["sites"][0]["site"] == f"probes/test_checkpoint.py:{call_line}"
    assert sorted(reading["grad_none_params"]) == ["drafter.block.inner.bias", "drafter.block.inner.weight"]
    assert reading["grad_none_count"] == 2 and reading["trainable_params"] == 4
    assert reading["checked_backward_steps"] == 2


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_one_check_without_a_gradient_is_not_yet_a_parameter_that_never_gets_one(probe: CheckpointProbe) -> None:
    _train_step(Model(functools.partial(checkpoint, use_reentrant=True)), probe, steps=1)
    reading = probe.snapshot(0.0)
    assert reading["checked_backward_steps"] == 1 and reading["grad_none_count"] == 0


def test_a_head_used_every_other_step_is_not_without_gradient(probe: CheckpointProbe) -> None:
    """Multi-task batches alternate heads: each head's .grad is None at every other step (set_to_none=True), and
    it trains. Checked at every step here, so each head is seen without a gradient, then moved, again and again."""
    torch.manual_seed(0)
    trunk, heads = nn.Linear(8, 8), nn.ModuleList([nn.Linear(8, 1), nn.Linear(8, 2)])
    probe.watch_model("mt", nn.ModuleDict({"trunk": trunk, "heads": heads}))
    opt = torch.optim.SGD([*trunk.parameters(), *heads.parameters()], lr=0.1)
    for step in range(8):
        opt.zero_grad(set_to_none=True)
        heads[step % 2](trunk(torch.randn(4, 8))).sum().backward()
        opt.step()
    reading = probe.snapshot(0.0)
    assert reading["checked_backward_steps"] == 8 and reading["grad_none_count"] == 0, reading["grad_none_params"]


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_reentrant_positional_default_call_is_seen(probe: CheckpointProbe) -> None:
    model = Model(lambda fn, x: checkpoint(fn, x, use_reentrant=True))
    _train_step(model, probe)
    reading = probe.snapshot(0.0)
    assert reading["calls"]["reentrant"] == 2 and reading["grad_none_count"] == 2


def test_non_reentrant_gives_every_param_a_grad(probe: CheckpointProbe) -> None:
    model = Model(functools.partial(checkpoint, use_reentrant=False))
    _train_step(model, probe)
    reading = probe.snapshot(0.0)
    assert reading["calls"] == {"reentrant": 0, "non_reentrant": 2}
    assert reading["grad_none_params"] == [] and reading["grad_none_count"] == 0
    assert reading["checked_backward_steps"] == 2 and not reading["mixed_modes"]


def test_close_restores_torch(probe: CheckpointProbe) -> None:
    import torch.utils.checkpoint as tuc

    probe.close()
    assert "apply" not in vars(tuc.CheckpointFunction)
    assert tuc._checkpoint_without_reentrant_generator.__module__ == "torch.utils.checkpoint"


def test_naming_a_model_arms_at_once_so_the_first_calls_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """Started before the program imported torch's checkpoint code, the probe arms when the model is named, not
    at the next publish (a 4-step run on a loaded CI box finished before that and counted no call)."""
    import torch.utils.checkpoint as tuc

    monkeypatch.delitem(sys.modules, "torch.utils.checkpoint")
    p = CheckpointProbe(Config(check_interval_s=0.0))
    try:
        monkeypatch.setitem(sys.modules, "torch.utils.checkpoint", tuc)  # the program imports it now
        model = Model(functools.partial(checkpoint, use_reentrant=False))
        p.watch_model("drafter", model)
        model(torch.randn(4, 8, requires_grad=True)).backward()
        assert p.snapshot(0.0)["calls"]["non_reentrant"] == 1
    finally:
        p.close()
    p.watch_model("late", model)  # after close: torch stays as it was
    assert "apply" not in vars(tuc.CheckpointFunction)


def test_a_module_still_being_imported_is_not_a_failure(monkeypatch: pytest.MonkeyPatch,
                                                       half_imported: Callable[[str], None]) -> None:
    """The board thread can find torch.utils.checkpoint in sys.modules half-executed (import under way, no
    CheckpointFunction yet). The probe waits for the import to finish instead of giving up for the whole run
    (which a loaded CI box hit: a 4-step trainer run counted no checkpoint call)."""
    import torch.utils.checkpoint as tuc

    half_imported("torch.utils.checkpoint")
    p = CheckpointProbe(Config(check_interval_s=0.0))
    try:
        first = p.snapshot(0.0)
        assert first["armed"] is False and first["hook_errors"] == 0
        monkeypatch.setitem(sys.modules, "torch.utils.checkpoint", tuc)  # the import finished
        model = Model(functools.partial(checkpoint, use_reentrant=True))
        p.watch_model("drafter", model)
        model(torch.randn(4, 8, requires_grad=True)).backward()
        after = p.snapshot(0.0)
        assert after["armed"] is True and after["calls"]["reentrant"] == 1
    finally:
        p.close()
