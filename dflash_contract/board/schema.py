"""The board document: its schema tag, its size and nesting bounds, and its shape as TypedDicts (docs/board.md)."""

from __future__ import annotations

from typing import Any, Final, TypedDict

BOARD_SCHEMA: Final = "dflash-diag.board/1"
MAX_BOARD_BYTES: Final = 4 * 1024 * 1024
MAX_BOARD_DEPTH: Final = 32  # nesting of objects/arrays; the writer's documents are about 6 deep
MAX_STRING_CHARS: Final = 64 * 1024


class WriterIdentity(TypedDict):
    pid: int
    start_time_ticks: int  # /proc/<pid>/stat field 22: with the PID, identifies the process
    argv: list[str]  # redacted by the writer (dflash_contract.redact)
    python: str
    torch: str | None
    hostname: str


class ProbePayload(TypedDict, total=False):
    status: str  # ok | na | error
    reason: str  # with na and error
    errors: int
    hook_errors: int


class SessionInfo(TypedDict, total=False):
    enabled: list[str]
    steps: int
    step: int | None
    last_step_wall_s: float | None
    publishes: int
    publish_errors: int
    publish_cost_ms_mean: float | None
    board_error: str | None


class BoardDocument(TypedDict):
    schema: str
    writer: WriterIdentity
    seq: int
    wall_time_s: float
    interval_s: float  # the slowest the writer publishes (its timer)
    publish_interval_s: float | None  # the fastest (step-driven)
    final: bool
    threads: dict[int, str]  # native TID -> Python thread name (string keys in the JSON)
    probes: dict[str, dict[str, Any]]
    app: dict[str, Any]
    session: dict[str, Any]
