"""The probe board: what the in-process probes published, validated by ``sources.board``.

The JSON layout is specified in docs/board.md. Probe payloads stay plain JSON mappings (read-only
views); ``analysis`` reads them through the documented keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dflash_contract.board import BOARD_SCHEMA, STATUS_OK, PayloadKeys

__all__ = ["BOARD_SCHEMA", "Board", "WriterIdentity"]


@dataclass(frozen=True, slots=True)
class WriterIdentity:
    """Who wrote the board: lets a reader tell a restarted process or a reused PID from the original."""

    pid: int
    start_time_ticks: int  # /proc/<pid>/stat field 22 at publish time
    argv: tuple[str, ...]  # redacted (by the writer, and again by the reader)
    python: str
    torch: str | None
    hostname: str


@dataclass(frozen=True, slots=True)
class Board:
    schema: str
    writer: WriterIdentity
    seq: int  # strictly increasing per writer
    wall_time_s: float  # time.time() when published
    interval_s: float  # how often the writer means to publish (staleness = now - wall_time_s >> interval_s)
    threads: Mapping[int, str]  # native TID -> Python thread name, from threading.enumerate()
    probes: Mapping[str, Mapping[str, Any]]  # probe name -> payload (docs/board.md); {"status": "na", ...} if N/A
    app: Mapping[str, Any]  # application section (the reference trainer: step, rates, config, flags)
    path: str  # where it was read from
    # Added by the probes issue (defaults keep older constructors working):
    session: Mapping[str, Any] = field(default_factory=dict)  # writer bookkeeping: steps, last_step_wall_s, publishes
    final: bool = False  # the writer's last publish (it was closing)
    publish_interval_s: float | None = None  # fastest publish rate (step-driven); interval_s is the slowest

    def probe(self, name: str) -> Mapping[str, Any] | None:
        """The payload of one probe, or None when the probe did not publish."""
        payload = self.probes.get(name)
        return payload if payload is not None and payload.get(PayloadKeys.STATUS) == STATUS_OK else None

    def age_s(self, now_wall_s: float) -> float:
        return max(0.0, now_wall_s - self.wall_time_s)
