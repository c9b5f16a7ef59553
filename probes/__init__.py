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
from typing import TYPE_CHECKING, Any

from dflash_contract.board import parse_probe_list
from probes.config import (
    ALL_PROBES,
    ENV_KEEP_BOARD,
    ENV_PROBES,
    ENV_TO_WANDB,
    ENV_WANDB_INTERVAL,
    ProbesConfig,
    config_from_env,
)

# The version of the dflash-diag distribution this package belongs to. `dflash-diag attach` refuses a process
# that already imported probes of another version (tests/probes/test_attach_inprocess.py keeps it equal to pyproject's).
__version__ = "0.1.0"

if TYPE_CHECKING:
    from probes.session import ProbeSession

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

__all__ = ["ALL_PROBES", "ENV_KEEP_BOARD", "ENV_PROBES", "ENV_TO_WANDB", "ENV_WANDB_INTERVAL", "ProbesConfig",
           "ProbeSession", "config_from_env", "current", "parse_probe_list", "start", "stop"]


def __getattr__(name: str) -> Any:
    # ProbeSession is importable from the package without importing the session module up front.
    if name == "ProbeSession":
        from probes.session import ProbeSession

        return ProbeSession
    raise AttributeError(name)

