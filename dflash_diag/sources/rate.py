"""The stack-sampling rate: a pure policy (no threads, no I/O), so every rule is tested with plain numbers.

The budget (docs/states.md): py-spy may use at most ``max_duty`` (10%) of one core, and it must not take CPU the
trainer needs. Within that:

- auto (no rate asked): 2 Hz while the CPUs the trainer may run on are busy, 5 Hz with one idle core, 10 Hz with
  two or more. Idle time is measured from /proc/stat over those CPUs. Staying at a step needs a quarter core less
  than climbing to it, so the rate does not flap around a threshold (py-spy's own use moves the reading a little);
- a rate asked for is used as is;
- then two caps: py-spy's measured CPU per dump (rate <= max_duty / cost), and a trainer that keeps >= 90% of its
  cores busy (then py-spy would steal from it: at most 2 Hz, and at most half an asked rate);
- a burst (``snapshot``'s one-off window of under 2 s) may use half a core, and the saturation cap does not apply
  (the dumps run at nice 10: a saturated trainer keeps its cores).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RateInputs:
    """What the sampler knows when it picks the rate (None: not measured yet)."""

    requested_hz: float | None  # None: auto
    current_hz: float  # the rate in force now (hysteresis)
    dump_cpu_s: float | None  # py-spy's CPU time per dump, recent mean
    target_cores: float | None  # cores' worth of CPU the target used lately
    allowed_cores: int  # cores the target may run on
    idle_cores: float | None  # idle cores among those, lately
    burst: bool = False  # a one-off window of seconds: a bigger py-spy budget, no saturation back-off


@dataclass(frozen=True, slots=True)
class RateDecision:
    rate_hz: float
    reason: str  # one line for the header / warnings: why this rate


@dataclass(frozen=True, slots=True)
class RatePolicy:
    max_duty: float = 0.10  # py-spy may use at most this share of one core
    burst_duty: float = 0.50  # ... during a one-off window of a few seconds (snapshot)
    min_hz: float = 0.2
    auto_steps_hz: tuple[float, ...] = (2.0, 5.0, 10.0)
    auto_idle_cores: tuple[float, ...] = (0.0, 1.0, 2.0)  # idle cores needed for each auto step
    hysteresis_cores: float = 0.25
    saturated_share: float = 0.90
    saturated_hz: float = 2.0

    def decide(self, inputs: RateInputs) -> RateDecision:
        if inputs.requested_hz is None:
            rate, reason = self._auto(inputs)
        else:
            rate, reason = inputs.requested_hz, f"asked {inputs.requested_hz:g} Hz"
        duty = self.burst_duty if inputs.burst else self.max_duty
        if inputs.dump_cpu_s is not None and inputs.dump_cpu_s > 0:
            cap = duty / inputs.dump_cpu_s
            if cap < rate:
                rate = max(self.min_hz, cap)
                reason = (f"py-spy dumps cost {inputs.dump_cpu_s * 1000:.0f} ms of CPU each "
                          f"(budget {duty:.0%} of a core)")
        if not inputs.burst and self.saturated(inputs) and rate > self.saturated_hz:
            limit = self.saturated_hz if inputs.requested_hz is None else min(self.saturated_hz,
                                                                              inputs.requested_hz / 2)
            rate = max(self.min_hz, min(rate, limit))
            reason = f"the trainer saturates its {inputs.allowed_cores} CPU cores"
        return RateDecision(rate, reason)

    def saturated(self, inputs: RateInputs) -> bool:
        return (inputs.target_cores is not None and inputs.allowed_cores > 0
                and inputs.target_cores >= self.saturated_share * inputs.allowed_cores)

    def _auto(self, inputs: RateInputs) -> tuple[float, str]:
        steps = self.auto_steps_hz
        if inputs.idle_cores is None:
            return steps[0], "auto: idle CPU not measured yet"
        idle = inputs.idle_cores
        level = 0
        for i, need in enumerate(self.auto_idle_cores):
            # Climbing to a step needs `need` idle cores; staying there needs a quarter core less.
            staying = inputs.current_hz >= steps[i]
            if idle >= need - (self.hysteresis_cores if staying else 0.0):
                level = i
        return steps[level], f"auto: {idle:.1f} idle cores"
