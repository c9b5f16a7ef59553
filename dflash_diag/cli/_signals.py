"""SIGTERM and SIGHUP for the commands that change another process (`attach`, `detach`, `doctor --attach`).

By default either signal kills a Python program on the spot: no ``finally`` runs, so a `doctor --attach`
ended by `kill`, systemd or a closed terminal left its probes in the trainer. Here both become
:class:`~dflash_diag.errors.Terminated`, raised once in the main thread like Ctrl-C's KeyboardInterrupt:
the request is cancelled or the probes are detached, then the command exits 128+N. A signal the user
chose to ignore (``nohup`` sets SIGHUP to SIG_IGN) or handles otherwise is left as it is.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

from dflash_diag.errors import Terminated

TERMINATING = (signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def terminate_like_ctrl_c() -> Iterator[None]:
    """While inside: the first SIGTERM/SIGHUP raises Terminated; later ones are ignored (the cleanup that
    the first one started must not be cut short: SIGKILL still ends the command, and the lease then acts)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread: a library caller keeps its own
        return
    raised: list[int] = []

    def handle(signum: int, frame: FrameType | None) -> None:
        if not raised:
            raised.append(signum)
            raise Terminated(signum)

    previous = {sig: signal.getsignal(sig) for sig in TERMINATING}
    for sig, old in previous.items():
        if old is signal.SIG_DFL:
            signal.signal(sig, handle)
    try:
        yield
    finally:
        for sig, old in previous.items():
            if old is signal.SIG_DFL:
                signal.signal(sig, old)


@contextlib.contextmanager
def deferred(signals: tuple[int, ...] = (signal.SIGINT, *TERMINATING)) -> Iterator[list[int]]:
    """While inside (a detach that must finish): these signals are noted in the yielded list, not acted on."""
    if threading.current_thread() is not threading.main_thread():
        yield []
        return
    noted: list[int] = []

    def note(signum: int, frame: FrameType | None) -> None:
        noted.append(signum)

    previous = {sig: signal.getsignal(sig) for sig in signals}
    previous = {sig: old for sig, old in previous.items() if old is not None}  # None: set outside Python, keep it
    for sig in previous:
        signal.signal(sig, note)
    try:
        yield noted
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
