"""Every probe, declared once: its board name, its ``Config`` and its class, read off the probe's own module (each
exports ``NAME``, ``Config`` and ``PROBE``). ``PROBES`` feeds both the configuration (``probes.config``: one
``Config`` per probe, by name) and the session (``probes.session`` builds the enabled probes from it); a test holds
it equal to the board contract's list of names.

Importing it imports every probe module, none of which imports torch (they arm themselves once the program has).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from probes import (
    allocator,
    checkpoint,
    codedrift,
    collectives,
    compile,
    cudagraphs,
    fastpath,
    gil,
    health,
    mailbox,
    queues,
    settings,
    syncs,
    threads,
)
from probes._common import Probe


@dataclass(frozen=True, slots=True)
class ProbeSpec:
    name: str  # the probe's board name (dflash_contract.board.ProbeName)
    config: Callable[[], Any]  # its frozen Config, with its defaults
    build: Callable[[Any], Probe]  # its class: built from its Config


def _spec(module: ModuleType) -> ProbeSpec:
    return ProbeSpec(name=module.NAME, config=module.Config, build=module.PROBE)


# In the order the board lists them (dflash_contract.board.PROBE_NAMES).
PROBES: tuple[ProbeSpec, ...] = tuple(_spec(m) for m in (
    gil, allocator, compile, cudagraphs, queues, checkpoint, fastpath, codedrift, threads, health, collectives, syncs,
    mailbox, settings))
BY_NAME: dict[str, ProbeSpec] = {spec.name: spec for spec in PROBES}

__all__ = ["BY_NAME", "PROBES", "ProbeSpec"]
