"""In-process probes: cheap readings only the process itself can take, published to a per-process board.

Standard library + torch only; no UI imports. Every probe is a no-op when disabled, never raises into
the program it watches, and keeps bounded memory. The public API (used by the reference trainer and
by the ``dflash-diag run`` bootstrap)::

    session = probes.start(probes.ProbesConfig(enabled=probes.ALL_PROBES))
    q_hs = session.watch_queue("q_hs", queue.Queue(maxsize=8))   # returns a queue to use instead
    session.watch_model("drafter", drafter)                        # grad-None check after backward
    session.set_app(name="reference_trainer", config={...})        # the board's "app" section
    ...
    session.step(step)      # once per training step: cheap; publishes at most every publish_interval_s
    session.close()         # final publish; the board file is removed unless keep_board=True

The board format is docs/board.md.
"""

from __future__ import annotations

import queue as _queue
from dataclasses import dataclass, field
from typing import Any

ALL_PROBES: frozenset[str] = frozenset(
    {"gil", "allocator", "compile", "cudagraphs", "queues", "checkpoint", "fastpath", "codedrift"}
)


@dataclass(frozen=True, kw_only=True)
class ProbesConfig:
    enabled: frozenset[str] = field(default_factory=lambda: ALL_PROBES)
    publish_interval_s: float = 0.5
    board_dir: str | None = None  # default: $DFLASH_DIAG_BOARD_DIR, $XDG_RUNTIME_DIR/dflash-diag, /tmp/dflash-diag-<uid>
    keep_board: bool = False

    def __post_init__(self) -> None:
        unknown = set(self.enabled) - ALL_PROBES
        if unknown:
            raise ValueError(f"unknown probes: {', '.join(sorted(unknown))} (known: {', '.join(sorted(ALL_PROBES))})")
        if not self.publish_interval_s > 0:
            raise ValueError("publish_interval_s must be > 0")


class ProbeSession:
    """Placeholder session: the real one is built in probes/session.py (issue 3)."""

    def __init__(self, config: ProbesConfig) -> None:
        self.config = config

    def watch_queue(self, name: str, q: _queue.Queue) -> _queue.Queue:
        return q

    def watch_model(self, name: str, model: Any) -> None:
        pass

    def set_app(self, **fields: Any) -> None:
        pass

    def step(self, step: int | None = None) -> None:
        pass

    def close(self) -> None:
        pass


_session: ProbeSession | None = None


def start(config: ProbesConfig | None = None) -> ProbeSession:
    """Start (or return the already started) probe session of this process."""
    global _session
    if _session is None:
        _session = ProbeSession(config or ProbesConfig())
    return _session


def current() -> ProbeSession | None:
    return _session
