"""How the probes of one process are configured (``probes.start(ProbesConfig(...))``): which run, how often the board
is published, where it goes, wandb, and each probe's own ``Config`` (the registry, ``probes/registry.py``, says
which probes there are and their defaults). Standard library only: it imports no torch.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from dflash_contract.board import PROBE_NAMES, parse_probe_list
from probes.registry import BY_NAME, PROBES

ALL_PROBES: frozenset[str] = frozenset(PROBE_NAMES)  # the names are the board contract's

# Environment read by the `dflash-diag run` bootstrap (probes/_bootstrap/sitecustomize.py).
ENV_PROBES = "DFLASH_DIAG_PROBES"  # "all", "none" or a comma list
ENV_KEEP_BOARD = "DFLASH_DIAG_KEEP_BOARD"
ENV_TO_WANDB = "DFLASH_DIAG_PROBES_TO_WANDB"  # "1": log the readings into the program's wandb run
ENV_WANDB_INTERVAL = "DFLASH_DIAG_WANDB_INTERVAL_S"  # seconds between two wandb logs (default 2)


@dataclass(frozen=True, kw_only=True)
class ProbesConfig:
    enabled: frozenset[str] = field(default_factory=lambda: ALL_PROBES)
    publish_interval_s: float = 0.5  # at most 2 Hz, piggybacked on step()
    timer_interval_s: float = 1.0  # the board thread publishes at least this often, steps or not
    board_dir: str | None = None  # default: $DFLASH_DIAG_BOARD_DIR, $XDG_RUNTIME_DIR/dflash-diag, /tmp/dflash-diag-<uid>
    keep_board: bool = False
    wandb: bool = False  # log the readings into the program's active wandb run (probes/wandb_log.py)
    wandb_interval_s: float = 2.0  # at most one wandb log per this many seconds
    # Look for the queues the program's threads hold while it runs (probes/discover.py), for a program that does
    # not register them itself: `dflash-diag run` starts the probes before the program has made any.
    discover: bool = False
    # Each probe's own frozen Config, by its name (``{"gil": gil.Config(knock_interval_s=...)}``); a probe left out
    # gets its Config's defaults (the registry's).
    probes: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "enabled", frozenset(self.enabled))
        unknown = (set(self.enabled) | set(self.probes)) - ALL_PROBES
        if unknown:
            raise ValueError(f"unknown probes: {', '.join(sorted(unknown))} (known: {', '.join(sorted(ALL_PROBES))})")
        wrong = [name for name, config in self.probes.items() if not isinstance(config, BY_NAME[name].config)]
        if wrong:
            raise ValueError(f"not a {wrong[0]}.Config: the config of probe {wrong[0]!r}")
        object.__setattr__(self, "probes", MappingProxyType(
            {spec.name: self.probes.get(spec.name) or spec.config() for spec in PROBES}))
        if not self.publish_interval_s > 0:
            raise ValueError("publish_interval_s must be > 0")
        if not self.timer_interval_s >= self.publish_interval_s:
            raise ValueError("timer_interval_s must be >= publish_interval_s")
        if not self.wandb_interval_s > 0:
            raise ValueError("wandb_interval_s must be > 0")

    def config_of(self, name: str) -> Any:
        """The Config probe ``name`` is built from."""
        return self.probes[name]


def config_from_env(environ: dict[str, str] | None = None) -> ProbesConfig:
    env = os.environ if environ is None else environ
    return ProbesConfig(
        enabled=parse_probe_list(env.get(ENV_PROBES, "all")),
        keep_board=env.get(ENV_KEEP_BOARD, "") not in ("", "0"),
        wandb=env.get(ENV_TO_WANDB, "") not in ("", "0"),
        wandb_interval_s=_positive_float(env.get(ENV_WANDB_INTERVAL), ProbesConfig.wandb_interval_s),
    )


def _positive_float(text: str | None, default: float) -> float:
    try:
        value = float(text) if text else default
    except ValueError:
        return default
    return value if value > 0 and value == value and value != float("inf") else default


__all__ = ["ALL_PROBES", "ENV_KEEP_BOARD", "ENV_PROBES", "ENV_TO_WANDB", "ENV_WANDB_INTERVAL", "ProbesConfig",
           "config_from_env"]
