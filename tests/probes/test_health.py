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
from dflash_contract.readings import critical_alerts, readings
from probes.health import Config, HealthProbe


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
    assert "they get no gradient" in verdict.claim and "AdamW#0/0" in verdict.claim
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


# --- forms the casebook programs showed (tests/casebook/programs/*): each fails without its mechanism ----------


class _Encoder(nn.Module):
    """A big encoder and a small head in one model, one optimizer group (AdamW over model.parameters())."""

    def __init__(self, cut: bool = False) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.encoder = nn.Sequential(nn.Linear(16, 64), nn.Tanh(), nn.Linear(64, 32))
        self.head = nn.Linear(32, 1)
        self.cut = cut

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.cut:
            with torch.no_grad():  # an eval helper reused in training: the encoder never gets a gradient
                h = self.encoder(x)
        else:
            h = self.encoder(x)
        return self.head(h)


def _fit(model: nn.Module, opt: torch.optim.Optimizer, steps: int, loss_of: Callable[[nn.Module], torch.Tensor],
         *, set_to_none: bool = True) -> None:
    for _ in range(steps):
        opt.zero_grad(set_to_none=set_to_none)
        loss_of(model).backward()
        opt.step()


def _mse(model: nn.Module) -> torch.Tensor:
    x = torch.randn(8, 16)
    return (model(x) - x[:, :1]).pow(2).mean()


def test_a_cut_graph_in_one_group_is_named_though_the_head_trains(probe: HealthProbe) -> None:
    """The group's other tensors move: only per-tensor weights say that 96% of it never changes."""
    model = _Encoder(cut=True)
    _fit(model, torch.optim.AdamW(model.parameters(), lr=1e-3), 20, _mse)
    (verdict,) = judge(probe.snapshot(0.0), now_wall_s=0.0)
    assert verdict.rule_id == "training-no-update" and verdict.critical
    assert verdict.claim.startswith("4 of 6 tensors (99% of the weights) in 1 of 1 parameter groups have not trained")
    assert "they get no gradient" in verdict.claim
    (group,) = probe.snapshot(0.0)[HealthKeys.GROUPS]
    assert group[HealthKeys.STUCK_GRAD_NONE] == 4 and group[HealthKeys.UPDATE_RATIO] > 0  # the head moves
    shown = {r.name: r.value for r in readings({"health": probe.snapshot(0.0)})}  # Prometheus, wandb, top
    assert shown["health_stuck_tensors"] == 4 and shown["health_stuck_share"] > 0.98


def test_the_same_model_training_whole_is_healthy(probe: HealthProbe) -> None:
    model = _Encoder(cut=False)
    _fit(model, torch.optim.AdamW(model.parameters(), lr=1e-3), 20, _mse)
    assert _ids(probe) == set()


class _Gated(nn.Module):
    """x + gate * f(x) with the gate a zero buffer (meant to be a parameter): f's gradients are exactly zero."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.f = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 16))
        self.register_buffer("gate", torch.zeros(1))
        self.out = nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(x + self.gate * self.f(x))


def test_zero_gradients_are_named_though_weight_decay_moves_the_weights(probe: HealthProbe) -> None:
    """AdamW decays f's weights every step (they change), but Adam's exp_avg_sq of f stays exactly zero."""
    model = _Gated()
    before = model.f[0].weight.detach().clone()
    _fit(model, torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1), 20, _mse)
    assert not torch.equal(before, model.f[0].weight)  # weight decay moved them
    (verdict,) = judge(probe.snapshot(0.0), now_wall_s=0.0)
    assert verdict.rule_id == "training-no-update"
    assert "4 of 6 tensors" in verdict.claim and "exactly zero" in verdict.claim


@pytest.mark.parametrize("gate", ["buffer", "parameter"])
def test_attached_late_a_zero_moment_counts_the_steps_its_optimizer_applied_before(gate: str) -> None:
    """Attached to a program that has stepped 60 times, on a slow box that makes only 3 steps while doctor looks:
    Adam's exp_avg_sq of f, exactly zero after all its steps (60 before, 2 seen), is the evidence (no MIN_STEPS more
    steps needed). The same model whose gate is a parameter (it opens: f trains) gets nothing."""
    model = _Gated()
    if gate == "parameter":
        model.gate = nn.Parameter(torch.zeros(1))  # type: ignore[assignment]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    _fit(model, opt, 60, _mse)  # before the probe came in
    p = HealthProbe(Config(interval_s=0.0))
    try:
        _fit(model, opt, 3, _mse)
        verdicts = judge(p.snapshot(0.0), now_wall_s=0.0)
    finally:
        p.close()
    if gate == "parameter":
        assert verdicts == []
        return
    (verdict,) = verdicts
    assert verdict.rule_id == "training-no-update" and "4 of 6 tensors" in verdict.claim
    assert "have not trained in 62 optimizer steps" in verdict.claim, verdict.claim
    assert "in any of the 62 steps their optimizer applied" in dict(verdict.evidence)["group AdamW#0/0"]


def test_an_optimizer_holding_only_frozen_tensors_trains_nothing(probe: HealthProbe) -> None:
    """Adapters injected after the optimizer was built: the base it holds is frozen, the adapters are in none."""
    model = _model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model.requires_grad_(False)
    adapter = nn.Linear(8, 8)
    _fit(model, opt, 20, lambda m: m(adapter(torch.randn(4, 8))).pow(2).mean())
    (verdict,) = judge(probe.snapshot(0.0), now_wall_s=0.0)
    assert verdict.rule_id == "training-no-update" and verdict.critical
    assert "steps over 4 tensors none of which requires grad" in verdict.claim


def test_a_frozen_optimizer_beside_one_that_trains_is_not_judged(probe: HealthProbe) -> None:
    """Phased training (a second optimizer whose model is still frozen) is a schedule, not a fault."""
    model, later = _model(), _model()
    later.requires_grad_(False)
    opts = [torch.optim.SGD(model.parameters(), lr=0.05), torch.optim.SGD(later.parameters(), lr=0.05)]
    for _ in range(20):
        for o in opts:
            o.zero_grad(set_to_none=True)
        (model(torch.randn(4, 8)) + later(torch.randn(4, 8))).pow(2).mean().backward()
        for o in opts:
            o.step()
    assert _ids(probe) == set()


def test_a_few_unused_tensors_are_not_a_group_that_does_not_train(probe: HealthProbe) -> None:
    """An unused pooler (a sliver of the weights) stays unchanged: true, and not the failure."""
    model = _Encoder()
    pooler = nn.Linear(2, 2)  # 6 of ~2.7K weights, in the optimizer, never in the loss
    _fit(model, torch.optim.AdamW([*model.parameters(), *pooler.parameters()], lr=1e-3), 20, _mse)
    (group,) = probe.snapshot(0.0)[HealthKeys.GROUPS]
    assert group[HealthKeys.STUCK_TENSORS] == 2
    assert _ids(probe) == set()


def test_heads_used_every_other_step_train(probe: HealthProbe) -> None:
    torch.manual_seed(0)
    trunk, heads = nn.Linear(8, 16), nn.ModuleList([nn.Linear(16, 1), nn.Linear(16, 3)])
    opt = torch.optim.Adam([*trunk.parameters(), *heads.parameters()], lr=1e-3)
    for step in range(30):
        opt.zero_grad(set_to_none=True)
        heads[step % 2](trunk(torch.randn(4, 8))).pow(2).mean().backward()
        opt.step()
    assert _ids(probe) == set()
    assert not probe._want_graph  # a head without gradient at a sample moved since: no graph to walk


def test_steps_a_grad_scaler_skips_inside_a_fused_optimizer_are_not_non_finite(probe: HealthProbe) -> None:
    """fused=True: the scaler passes found_inf to the optimizer, whose step hook fires with overflowed (inf)
    gradients and which then skips the update. Such a step is skipped by the probe too."""
    model = _model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**20, growth_interval=2)  # overflows every few steps
    for _ in range(30):
        with torch.autocast("cpu", dtype=torch.float16):
            loss = model(torch.randn(4, 8)).float().pow(2).mean()
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    payload = probe.snapshot(0.0)
    assert payload[HealthKeys.AMP_SKIPPED] > 0 and payload[HealthKeys.SAMPLES] > 0
    assert _ids(probe) == set()


def test_the_loss_of_a_step_the_scaler_skipped_is_not_the_loss_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """A GradScaler skips an overflowing step before the optimizer (no hook): the loss read with the next sample is
    the one of the step that was taken, not the inf of the one skipped."""
    clock = [100.0]
    monkeypatch.setattr("probes.health.time.monotonic", lambda: clock[0])
    p = HealthProbe(Config(interval_s=1.0))
    try:
        model = _model()
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        _train(model, opt, 1)  # the first sample
        clock[0] += 2.0  # the next one is due
        model(torch.randn(4, 8)).sum().mul(math.inf).backward()  # an inf loss: the scaler skips this step
        opt.zero_grad(set_to_none=True)
        _train(model, opt, 1)  # a finite loss, a step taken: sampled
        payload = p.snapshot(0.0)
        assert payload[HealthKeys.SAMPLES] == 2 and math.isfinite(payload[HealthKeys.LOSS])
        assert {v.rule_id for v in judge(payload, 0.0)} == set()
    finally:
        p.close()


def test_each_optimizer_is_sampled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two optimizers stepped one after the other (a GAN): the second is sampled too, and its stale copy named."""
    clock = [100.0]
    monkeypatch.setattr("probes.health.time.monotonic", lambda: clock[0])
    p = HealthProbe(Config(interval_s=1.0))
    try:
        critic, generator = _model(), _model()
        opt_c = torch.optim.SGD(critic.parameters(), lr=0.05)
        opt_g = torch.optim.SGD(copy.deepcopy(generator).parameters(), lr=0.05)  # built over a copy
        for _ in range(15):
            clock[0] += 1.5
            for model, opt in ((critic, opt_c), (generator, opt_g)):
                opt.zero_grad(set_to_none=True)
                model(torch.randn(4, 8)).pow(2).mean().backward()
                opt.step()
        groups = {g[HealthKeys.GROUP] for g in p.snapshot(0.0)[HealthKeys.GROUPS]}
        assert groups == {"SGD#0/0", "SGD#1/0"}
        (verdict,) = judge(p.snapshot(0.0), 0.0)
        assert verdict.rule_id == "training-no-update" and "(SGD#1/0)" in verdict.claim
    finally:
        p.close()


def test_an_optimizer_that_is_gone_leaves_the_board(probe: HealthProbe) -> None:
    model = _model()
    _train(model, torch.optim.SGD(copy.deepcopy(model).parameters(), lr=0.05), 20)  # stale, then dropped
    assert judge(probe.snapshot(0.0), 0.0)
    _train(model, torch.optim.SGD(model.parameters(), lr=0.05), 20)  # a new optimizer over the right model
    assert {g[HealthKeys.GROUP] for g in probe.snapshot(0.0)[HealthKeys.GROUPS]} == {"SGD#1/0"}
    assert _ids(probe) == set()


def test_weights_whose_memory_is_replaced_are_read_where_they_now_are(probe: HealthProbe) -> None:
    """model.double() sets each parameter's .data: a view of the old memory would never change again."""
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    _train(model, opt, 3)
    model.double()
    for _ in range(20):
        opt.zero_grad(set_to_none=True)
        model(torch.randn(4, 8, dtype=torch.float64)).pow(2).mean().backward()
        opt.step()
    assert _ids(probe) == set()


def test_a_sample_due_between_a_backward_and_its_step_reads_that_loss(monkeypatch: pytest.MonkeyPatch) -> None:
    """The interval can end after a backward and before its step: the sample still has that step's loss (a loss
    gone NaN was otherwise reported as 'None' at such samples)."""
    clock = [100.0]
    monkeypatch.setattr("probes.health.time.monotonic", lambda: clock[0])
    p = HealthProbe(Config(interval_s=1.0))
    try:
        model = _model()
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            model(torch.randn(4, 8)).pow(2).mean().backward()
            clock[0] += 1.5  # due now, after the backward
            opt.step()
        payload = p.snapshot(0.0)
        assert payload[HealthKeys.SAMPLES] == 3 and isinstance(payload[HealthKeys.LOSS], float)
    finally:
        p.close()


def test_gradients_cleared_between_backward_and_step_are_told_from_a_model_copy(probe: HealthProbe) -> None:
    """zero_grad() after backward(): the loss's graph reaches the tensors, their gradients are gone at the step. A
    model copy: the graph does not reach them. Both train nothing; the claim says which (the loss's graph, walked
    only once a sample has seen tensors without a gradient)."""
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for _ in range(20):
        model(torch.randn(4, 8)).pow(2).mean().backward()
        opt.zero_grad()  # misplaced: after the backward
        opt.step()
    (verdict,) = judge(probe.snapshot(0.0), 0.0)
    assert "although the loss's graph reaches them" in verdict.claim and "zero_grad() after backward" in verdict.claim
    probe.close()
    other = HealthProbe(Config(interval_s=0.0))
    try:
        _train(model, torch.optim.SGD(copy.deepcopy(model).parameters(), lr=0.05), 20)
        (verdict,) = judge(other.snapshot(0.0), 0.0)
        assert "the loss's autograd graph does not reach them" in verdict.claim
    finally:
        other.close()


def test_a_healthy_run_never_keeps_the_losss_graph(probe: HealthProbe) -> None:
    model = _model()
    _train(model, torch.optim.SGD(model.parameters(), lr=0.05), 10)
    assert probe._loss_graph is None and not probe._want_graph


class _Clock:
    """time.monotonic for the probe, moved by the test."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = 100.0
        monkeypatch.setattr("probes.health.time.monotonic", lambda: self.now)


def _iterations(model: nn.Module, clock: _Clock, n: int, *, step: Callable[[], None] | None = None,
                clear: bool = True, loss_of: Callable[[torch.Tensor], torch.Tensor] | None = None) -> None:
    """``n`` iterations 0.1 s apart: zero_grad (when ``clear``), forward, backward, then ``step`` if given."""
    for _ in range(n):
        clock.now += 0.1
        if clear:
            model.zero_grad(set_to_none=True)
        out = model(torch.randn(4, 8))
        (loss_of(out) if loss_of is not None else out.pow(2).mean()).backward()
        if step is not None:
            step()


def test_backward_without_any_optimizer_step_trains_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """optimizer.step() removed from the loop: no step hook ever fires; the backward side sees that nothing the
    loss depends on changes."""
    clock = _Clock(monkeypatch)
    p = HealthProbe(Config(interval_s=1.0))
    try:
        model = _model()
        torch.optim.AdamW(model.parameters(), lr=1e-3)  # built, never stepped
        _iterations(model, clock, 50)
        (verdict,) = judge(p.snapshot(0.0), 0.0)
        assert verdict.rule_id == "training-no-update" and verdict.critical
        assert "without an optimizer step" in verdict.claim and "none of the 4 tensors" in verdict.claim
        assert "no optimizer.step() runs" in verdict.claim
    finally:
        p.close()


def test_a_grad_scaler_skipping_every_step_of_a_nan_loss_trains_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _Clock(monkeypatch)
    p = HealthProbe(Config(interval_s=1.0))
    try:
        model = _model()
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        scaler = torch.amp.GradScaler("cpu")
        for _ in range(50):
            clock.now += 0.1
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.float16):
                loss = (model(torch.randn(4, 8)) * math.nan).float().mean()
            scaler.scale(loss).backward()
            scaler.step(opt)  # found inf: skipped, no hook fires
            scaler.update()
        (verdict,) = judge(p.snapshot(0.0), 0.0)
        assert verdict.rule_id == "training-no-update" and "the loss is nan: a GradScaler skips" in verdict.claim
    finally:
        p.close()


@pytest.mark.parametrize("how", ["no-optimizer", "accumulating", "manual-update", "steps-every-3s"])
def test_backward_without_steps_that_is_not_a_fault(monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    """Saliency or attacks on inputs (no optimizer at all), gradients accumulated over a long window (not cleared),
    a hand-written update (the weights change), an optimizer stepping every 3 s: no verdict."""
    import probes.health as health_mod

    clock = _Clock(monkeypatch)
    if how == "no-optimizer":  # this test process built optimizers before: pretend it has not
        monkeypatch.setattr(health_mod, "_optimizer_built", lambda torch: False)
    p = HealthProbe(Config(interval_s=1.0))
    try:
        model = _model()
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        if how == "no-optimizer":
            _iterations(model, clock, 50)
        elif how == "accumulating":
            _iterations(model, clock, 50, clear=False)
        elif how == "manual-update":
            def update() -> None:
                with torch.no_grad():
                    for q in model.parameters():
                        q -= 0.05 * q.grad
            _iterations(model, clock, 50, step=update)
        else:  # zero_grad every iteration, a step every 4 s: the pause before the next step is its normal
            for _ in range(4):
                _iterations(model, clock, 40)
                opt.step()
            _iterations(model, clock, 45)
        assert {v.rule_id for v in judge(p.snapshot(0.0), 0.0)} == set()
    finally:
        p.close()


def test_a_warm_up_from_zero_read_between_two_samples_is_not_a_zero_lr(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first sample sees lr 0 (a warm-up's step 0); the board is read 60 steps later, before the next sample.
    The lr was seen 0 at one step, not for 60 (a false training-lr-zero on a fast healthy program, once)."""
    clock = _Clock(monkeypatch)
    p = HealthProbe(Config(interval_s=1.0))
    try:
        model = _model()
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: s / 150)
        for _ in range(60):
            clock.now += 0.01
            _train(model, opt, 1)
            sched.step()
        payload = p.snapshot(0.0)
        assert payload[HealthKeys.STEPS] == 60 and payload[HealthKeys.SAMPLES] == 1
        assert judge(payload, 0.0) == []
    finally:
        p.close()


# --- several threads, each with its own optimizer (a false critical on the H200 and on CPU with doctor --attach) ----


class _Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.relu(self.up(self.norm(x))))


class _Net(nn.Module):
    """Blocks with a ReLU MLP whose hidden unit 0 never fires in block 1 (a dead unit, as ReLU MLPs have): the
    first column of that block's down projection gets no gradient, every other column trains. A [64k, n] weight's
    old fingerprint (stride numel // 64) lay entirely in column 0."""

    def __init__(self, width: int = 64, checkpointed: bool = False) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.blocks = nn.ModuleList(_Block(width) for _ in range(3))
        self.head = nn.Linear(width, 10)
        self.checkpointed = checkpointed
        with torch.no_grad():
            self.blocks[1].up.bias[0] = -100.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False) if self.checkpointed else block(x)
        return self.head(x)


def _adamw(net: nn.Module) -> torch.optim.Optimizer:
    return torch.optim.AdamW(net.parameters(), lr=1e-3, weight_decay=0.0)


def _fit_net(net: _Net, opt: torch.optim.Optimizer, steps: int) -> None:
    for _ in range(steps):
        x = torch.randn(16, 64)
        loss = nn.functional.cross_entropy(net(x), x[:, :10].argmax(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


def test_a_dead_unit_in_a_trained_weight_is_not_a_weight_that_does_not_train(probe: HealthProbe) -> None:
    net = _Net()
    column = net.blocks[1].down.weight[:, 0].detach().clone()
    _fit_net(net, _adamw(net), 20)
    assert torch.equal(column, net.blocks[1].down.weight[:, 0])  # the dead unit's column never moves ...
    assert _ids(probe) == set()  # ... and the weight trains


def test_threads_each_with_its_own_optimizer_all_training_get_no_finding() -> None:
    """Three threads, each an AdamW over its own model (one under non-reentrant activation checkpointing), all
    training at once, sampled as the probe samples a live program (once a second per optimizer)."""
    import threading

    p = HealthProbe(Config(interval_s=0.05))
    try:
        nets = [_Net(), _Net(checkpointed=True), _Net()]
        opts = [_adamw(net) for net in nets]  # alive after the threads end: their groups stay on the board
        threads = [threading.Thread(target=_fit_net, args=(net, opt, 150)) for net, opt in zip(nets, opts, strict=True)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        payload = p.snapshot(0.0)
        assert payload[HealthKeys.STEPS] == 450
        groups = payload[HealthKeys.GROUPS]
        assert sorted(g[HealthKeys.GROUP] for g in groups) == ["AdamW#0/0", "AdamW#1/0", "AdamW#2/0"]
        assert all(g[HealthKeys.SAMPLED_STEP] <= 150 for g in groups)  # each judged over its own optimizer's steps
        assert judge(payload, 0.0) == []
    finally:
        p.close()


def test_fingerprinted_elements_without_a_gradient_say_nothing(probe: HealthProbe) -> None:
    """An embedding whose fingerprinted rows are tokens the data never holds: those rows never move (Adam, no
    weight decay) while every row the data uses trains. Unchanged weights where the step had nothing to apply are no
    evidence; the same embedding held by an optimizer the forward does not use still is."""
    from probes._common import fingerprint_view

    vocab, width = 512, 16
    torch.manual_seed(0)
    table = nn.Embedding(vocab, width)
    looked_at = {int(i) // width for i in fingerprint_view(torch.arange(vocab * width).view(vocab, width), 64)}
    used = torch.tensor([t for t in range(vocab) if t not in looked_at])
    opt = torch.optim.Adam(table.parameters(), lr=1e-2)
    for _ in range(20):
        ids = used[torch.randint(0, len(used), (32,))]
        opt.zero_grad(set_to_none=True)
        table(ids).pow(2).mean().backward()
        opt.step()
    (group,) = probe.snapshot(0.0)[HealthKeys.GROUPS]
    assert group[HealthKeys.STUCK_TENSORS] == 0 and _ids(probe) == set()


def test_a_fingerprint_spreads_over_the_columns_of_a_weight() -> None:
    from probes._common import fingerprint_view

    for rows, cols in ((64, 256), (128, 512), (256, 64), (4096, 1024), (100, 7)):
        positions = fingerprint_view(torch.arange(rows * cols).view(rows, cols), 64)
        assert len(positions) == 64 and len(set(positions.tolist())) == 64
        assert len({int(i) % cols for i in positions}) == min(64, cols)  # 64 different input units (or all)
        assert len({int(i) // cols for i in positions}) >= min(32, rows)  # spread over the rows too
