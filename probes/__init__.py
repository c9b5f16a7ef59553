"""In-process probes: cheap readings only the process itself can take, published to a per-process board.

Standard library + torch only; no UI imports; ``import probes`` does not import torch (probes that need
it arm themselves once the program has imported the torch pieces they watch). Every probe is a no-op
when disabled, never raises into the program it watches, and keeps bounded memory. The public API (used
by the reference trainer and by the ``dflash-diag run`` bootstrap)::

    session = probes.start(probes.ProbesConfig(enabled=probes.ALL_PROBES))
    q_hs = session.watch_queue("q_hs", queue.Queue(maxsize=8))   # returns the queue to use (same object)
    session.watch_model("drafter", drafter)                        # names params for the grad-None check
    session.set_app(name="reference_trainer", config={...})        # the board's "app" section
    ...
    session.step(step)      # once per training step: ~1 us; publishes at most every publish_interval_s
    probes.start(wandb=True)  # also log the readings into the program's wandb run (docs/integrations.md)
    session.close()         # final publish; the board file is removed unless keep_board=True

What each probe measures and costs: docs/probes.md. The board format: docs/board.md.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dflash_contract.board import PROBE_NAMES, parse_probe_list
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

# The version of the dflash-diag distribution this package belongs to. `dflash-diag attach` refuses a process
# that already imported probes of another version (tests/probes/test_attach_inprocess.py keeps it equal to pyproject's).
__version__ = "0.1.0"

if TYPE_CHECKING:
    from probes.session import ProbeSession

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
    gil: gil.Config = field(default_factory=gil.Config)
    allocator: allocator.Config = field(default_factory=allocator.Config)
    compile: compile.Config = field(default_factory=compile.Config)
    cudagraphs: cudagraphs.Config = field(default_factory=cudagraphs.Config)
    queues: queues.Config = field(default_factory=queues.Config)
    checkpoint: checkpoint.Config = field(default_factory=checkpoint.Config)
    fastpath: fastpath.Config = field(default_factory=fastpath.Config)
    codedrift: codedrift.Config = field(default_factory=codedrift.Config)
    threads: threads.Config = field(default_factory=threads.Config)
    health: health.Config = field(default_factory=health.Config)
    collectives: collectives.Config = field(default_factory=collectives.Config)
    syncs: syncs.Config = field(default_factory=syncs.Config)
    mailbox: mailbox.Config = field(default_factory=mailbox.Config)
    settings: settings.Config = field(default_factory=settings.Config)

    def __post_init__(self) -> None:
        object.__setattr__(self, "enabled", frozenset(self.enabled))
        unknown = set(self.enabled) - ALL_PROBES
        if unknown:
            raise ValueError(f"unknown probes: {', '.join(sorted(unknown))} (known: {', '.join(sorted(ALL_PROBES))})")
        if not self.publish_interval_s > 0:
            raise ValueError("publish_interval_s must be > 0")
        if not self.timer_interval_s >= self.publish_interval_s:
            raise ValueError("timer_interval_s must be >= publish_interval_s")
        if not self.wandb_interval_s > 0:
            raise ValueError("wandb_interval_s must be > 0")


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


_session: ProbeSession | None = None


def start(config: ProbesConfig | None = None, *, wandb: bool | None = None) -> ProbeSession:
    """Start (or return the already started) probe session of this process.

    ``wandb=True`` logs the readings into the program's wandb run whenever one is active (also on a session
    that was already started, e.g. by ``dflash-diag run``); ``False`` stops it; None keeps the config's choice.
    """
    global _session
    if _session is None:
        from probes.session import ProbeSession

        _session = ProbeSession(config or ProbesConfig())
    if wandb is not None:
        _session.log_to_wandb(wandb)
    return _session


def current() -> ProbeSession | None:
    return _session


def stop() -> None:
    """Close this process's session (if any) and forget it: a later start() begins a new one."""
    global _session
    session, _session = _session, None
    if session is not None:
        session.close()


def _after_fork_in_child() -> None:
    # The parent's session (its threads, its board) does not belong to a forked child.
    global _session
    if _session is not None:
        _session.forget_after_fork()
    _session = None


os.register_at_fork(after_in_child=_after_fork_in_child)

__all__ = ["ALL_PROBES", "ProbesConfig", "ProbeSession", "config_from_env", "current", "parse_probe_list", "start", "stop"]


def __getattr__(name: str) -> Any:
    # ProbeSession is importable from the package without importing the session module up front.
    if name == "ProbeSession":
        from probes.session import ProbeSession

        return ProbeSession
    raise AttributeError(name)

