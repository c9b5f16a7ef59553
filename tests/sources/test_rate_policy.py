"""The stack-rate policy, with plain numbers: no threads, no clock, no processes."""

from __future__ import annotations

import pytest

from dflash_diag.sources.rate import RateInputs, RatePolicy

POLICY = RatePolicy()


def inputs(**over: object) -> RateInputs:
    base: dict[str, object] = dict(requested_hz=None, current_hz=2.0, dump_cpu_s=0.005, target_cores=1.0,
                                   allowed_cores=16, idle_cores=14.0)
    base.update(over)
    return RateInputs(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(("idle", "current", "expected"), [
    (14.0, 2.0, 10.0),  # the H200 box: 14 of 16 cores idle
    (2.0, 2.0, 10.0),
    (1.9, 2.0, 5.0),  # not quite two idle cores: one step
    (1.9, 10.0, 10.0),  # ... but staying at 10 Hz needs a quarter core less (no flapping)
    (1.7, 10.0, 5.0),
    (1.0, 2.0, 5.0),
    (0.8, 5.0, 5.0),
    (0.7, 5.0, 2.0),
    (0.3, 2.0, 2.0),  # a busy box: the floor
    (None, 10.0, 2.0),  # not measured yet: the floor
])
def test_auto_follows_idle_cores_with_hysteresis(idle: float | None, current: float, expected: float) -> None:
    decision = POLICY.decide(inputs(idle_cores=idle, current_hz=current))
    assert decision.rate_hz == expected
    assert decision.reason.startswith("auto")


def test_py_spy_cost_caps_every_rate() -> None:
    """40 ms of py-spy CPU per dump: 10% of a core allows 2.5 Hz, whatever auto or the user wanted."""
    auto = POLICY.decide(inputs(dump_cpu_s=0.040))
    asked = POLICY.decide(inputs(dump_cpu_s=0.040, requested_hz=20.0))
    assert auto.rate_hz == asked.rate_hz == pytest.approx(2.5)
    assert "40 ms of CPU" in auto.reason and "10% of a core" in auto.reason
    assert POLICY.decide(inputs(dump_cpu_s=5.0)).rate_hz == POLICY.min_hz  # never stops altogether


def test_a_saturated_trainer_gets_at_most_two_hz() -> None:
    busy = POLICY.decide(inputs(target_cores=15.0, idle_cores=0.2, requested_hz=10.0))
    assert busy.rate_hz == 2.0 and "saturates its 16 CPU cores" in busy.reason
    # an asked rate is halved, never raised
    assert POLICY.decide(inputs(target_cores=15.0, requested_hz=3.0)).rate_hz == 1.5
    assert POLICY.decide(inputs(target_cores=15.0, requested_hz=1.0)).rate_hz == 1.0
    # auto on a saturated box: the floor
    assert POLICY.decide(inputs(target_cores=15.5, idle_cores=0.5)).rate_hz == 2.0


def test_an_asked_rate_is_kept_when_affordable() -> None:
    decision = POLICY.decide(inputs(requested_hz=7.0, idle_cores=0.0))
    assert decision.rate_hz == 7.0 and decision.reason == "asked 7 Hz"


def test_a_burst_may_use_half_a_core_and_ignores_saturation() -> None:
    """snapshot's one-off window: 40 ms dumps allow 12.5 Hz (not 2.5), and a saturated trainer does not slow it."""
    burst = POLICY.decide(inputs(requested_hz=20.0, dump_cpu_s=0.040, target_cores=15.5, idle_cores=0.1, burst=True))
    assert burst.rate_hz == pytest.approx(12.5) and "50% of a core" in burst.reason
    assert POLICY.decide(inputs(requested_hz=20.0, target_cores=15.5, burst=True)).rate_hz == 20.0
