"""How long and how fast a target is sampled: one :class:`Window` for every command that takes one (``doctor``,
``top --batch``, ``snapshot``, ``record``), with one default, one range per setting and one burst rule.

A one-off window the user asked for takes 20 stack samples a second with py-spy allowed half a core (never pausing
the process: ``--nonblocking``), for windows up to ``BURST_MAX_S``: at the live sampler's 2 Hz, a busy 2-core box
gave 9 samples in 5 s, too few to tell a recompile storm from warm-up. Longer windows, and an asked ``--rate``,
get the live budget (a tenth of a core). A job's burst is shared between its ranks (``sources.jobcollect``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dflash_diag.sources.config import BURST_RATE_HZ, MAX_RATE_HZ, MIN_RATE_HZ, SamplerConfig

# Every command's default window: 1.5 s (snapshot's old one) missed a hot loop that doctor's 5 s saw.
DEFAULT_DURATION_S = 5.0
MIN_DURATION_S = 0.5
MAX_DURATION_S = 600.0
BURST_MAX_S = 30.0


class WindowError(ValueError):
    """A window setting out of its range; the message names the flag and the range."""


@dataclass(frozen=True, slots=True)
class Window:
    """``duration_s`` of sampling; ``rate_hz`` stack samples a second (None: the burst for a short window, else
    auto); ``native``: native frames too (pauses the process, rate-limited)."""

    duration_s: float = DEFAULT_DURATION_S
    rate_hz: float | None = None
    native: bool = False

    def __post_init__(self) -> None:
        check_duration(self.duration_s)
        check_rate(self.rate_hz)

    @property
    def burst(self) -> bool:
        """A short window nobody asked a rate for: sampled as a one-off burst."""
        return self.rate_hz is None and self.duration_s <= BURST_MAX_S

    def sampler_config(self, board_dir: str | None = None) -> SamplerConfig:
        """The sampler's settings for this window: the burst, or the rate asked (or auto) on the live budget."""
        if self.burst:
            return SamplerConfig(rate_hz=BURST_RATE_HZ, burst=True, board_dir=board_dir, native=self.native)
        return SamplerConfig(rate_hz=self.rate_hz, board_dir=board_dir, native=self.native)

    def live_config(self, board_dir: str | None, history_s: float) -> SamplerConfig:
        """The live view's settings (``top``): the rate asked (or auto) on the live budget, ``history_s`` kept."""
        return SamplerConfig(rate_hz=self.rate_hz, native=self.native, window_s=history_s, board_dir=board_dir)


def check_duration(duration_s: float, flag: str = "--duration") -> float:
    """``duration_s`` when it is within the one range; WindowError naming ``flag`` (may be empty) otherwise."""
    if not (math.isfinite(duration_s) and MIN_DURATION_S <= duration_s <= MAX_DURATION_S):  # also refuses nan, inf
        raise WindowError(f"{flag} {duration_s:g}: must be between {MIN_DURATION_S:g} and {MAX_DURATION_S:g} "
                          "seconds".lstrip())
    return duration_s


def check_rate(rate_hz: float | None, flag: str = "--rate") -> float | None:
    """``rate_hz`` (None: auto) when it is within the one range; WindowError naming ``flag`` otherwise."""
    if rate_hz is not None and not (math.isfinite(rate_hz) and MIN_RATE_HZ <= rate_hz <= MAX_RATE_HZ):
        raise WindowError(f"{flag} {rate_hz:g}: must be between {MIN_RATE_HZ:g} and {MAX_RATE_HZ:g} samples per "
                          "second, or auto".lstrip())
    return rate_hz


__all__ = ["BURST_MAX_S", "DEFAULT_DURATION_S", "MAX_DURATION_S", "MIN_DURATION_S", "Window", "WindowError",
           "check_duration", "check_rate"]
