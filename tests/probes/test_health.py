"""The health probe on real torch training in this process: a model copy the optimizer steps over, a loss gone NaN,
a learning rate stuck at 0, each judged critical/warning by the one judgement (dflash_contract.health) that doctor
and the program's alerts share; and no verdict on healthy runs (set_to_none between steps, gradient accumulation,
clipping, a warm-up from lr 0, a frozen model beside the trained one)."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterator

import pytest
import torch
from torch import nn

from dflash_contract.board import HealthKeys
from dflash_contract.health import judge
from probes.health import Config, HealthProbe
from probes.readings import critical_alerts, readings


@pytest.fixture
def probe() -> Iterator[HealthProbe]:
    p = HealthProbe(Config(interval_s=0.0))  # sample every step: the test's steps are the window
    yield p
    p.close()


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))


def _train(model: nn.Module, opt: torch.optim.Optimizer, steps: int, *,
           loss_of: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
           accumulate: int = 1, clip: float | None = None, schedule: Callable[[int], float] | None = None) -> None:
    for step in range(steps):
        if schedule is not None:
            for group in opt.param_groups:
                group["lr"] = schedule(step)
        for _ in range(accumulate):
            x = torch.randn(4, 8)
            out = model(x)
            loss = loss_of(out, x) if loss_of is not None else out.pow(2).mean()
            loss.backward()
        if clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        opt.zero_grad(set_to_none=True)


def _ids(probe: HealthProbe) -> set[str]:
    return {v.rule_id for v in judge(probe.snapshot(0.0), now_wall_s=0.0)}


def test_a_healthy_run_reads_moving_weights_and_a_finite_loss(probe: HealthProbe) -> None:
    model = _model()
    _train(model, torch.optim.SGD(model.parameters(), lr=0.05), 20)
    payload = probe.snapshot(0.0)
    assert payload[HealthKeys.STEPS] == 20 and payload[HealthKeys.SAMPLES] == 20 and payload[HealthKeys.ARMED]
    (group,) = payload[HealthKeys.GROUPS]
    assert group[HealthKeys.TENSORS] == 4 and group[HealthKeys.GRAD_NONE] == 0 and group[HealthKeys.LR] == 0.05
    assert group[HealthKeys.UPDATE_RATIO] > 0 and group[HealthKeys.UNCHANGED_SINCE_STEP] is None
    assert isinstance(payload[HealthKeys.LOSS], float) and math.isfinite(payload[HealthKeys.LOSS])
    assert _ids(probe) == set()
    assert {r.name for r in readings({"health": payload})} >= {"health_lr", "health_update_ratio", "health_loss"}


def test_an_optimizer_over_a_model_copy_trains_nothing_and_says_why(probe: HealthProbe) -> None:
    used = _model()
    stale = copy.deepcopy(used)  # built before the model was re-created: the optimizer holds the copy
    _train(used, torch.optim.AdamW(stale.parameters(), lr=1e-3), 20)
    (verdict,) = judge(probe.snapshot(0.0), now_wall_s=0.0)
    assert verdict.rule_id == "training-no-update" and verdict.critical
    assert "none of their tensors gets a gradient" in verdict.claim and "AdamW#0/0" in verdict.claim
    assert [a.rule_id for a in critical_alerts({"health": probe.snapshot(0.0)})] == ["training-no-update"]


def test_a_loss_gone_nan_is_training_on_garbage_from_the_step_it_started(probe: HealthProbe) -> None:
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    _train(model, opt, 5)
    _train(model, opt, 5, loss_of=lambda out, x: (out / 0.0 * 0.0).mean())  # 0/0: NaN loss and gradients
    verdicts = {v.rule_id: v for v in judge(probe.snapshot(0.0), now_wall_s=0.0)}
    assert "training-nonfinite" in verdicts and verdicts["training-nonfinite"].critical
    assert "since step 6" in verdicts["training-nonfinite"].claim


def test_a_learning_rate_stuck_at_zero_is_a_warning_not_a_critical(probe: HealthProbe) -> None:
    model = _model()
    _train(model, torch.optim.SGD(model.parameters(), lr=0.0), 60)
    verdicts = {v.rule_id: v for v in judge(probe.snapshot(0.0), now_wall_s=0.0)}
    assert set(verdicts) == {"training-lr-zero"} and not verdicts["training-lr-zero"].critical


@pytest.mark.parametrize("how", ["accumulate", "clip", "warmup-from-zero", "frozen-beside"])
def test_healthy_forms_get_no_verdict(probe: HealthProbe, how: str) -> None:
    model = _model()
    if how == "frozen-beside":
        torch.manual_seed(1)
        frozen = nn.Sequential(nn.Linear(8, 1)).requires_grad_(False)  # a teacher in no optimizer
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        _train(model, opt, 20, loss_of=lambda out, x: (out - frozen(x)).pow(2).mean())
    elif how == "accumulate":
        _train(model, torch.optim.SGD(model.parameters(), lr=0.05), 20, accumulate=4)
    elif how == "clip":
        _train(model, torch.optim.SGD(model.parameters(), lr=0.05), 20, clip=0.01)
    else:
        _train(model, torch.optim.SGD(model.parameters(), lr=0.0), 60, schedule=lambda s: min(0.05, 0.005 * s))
    assert _ids(probe) == set()


def test_close_puts_backward_and_the_hook_back() -> None:
    original = torch.Tensor.backward
    p = HealthProbe(Config(interval_s=0.0))
    assert torch.Tensor.backward is not original
    p.close()
    assert torch.Tensor.backward is original
    model = _model()
    _train(model, torch.optim.SGD(model.parameters(), lr=0.05), 3)
    assert p.snapshot(0.0)[HealthKeys.STEPS] == 0  # the hook is gone: no step counted after close
