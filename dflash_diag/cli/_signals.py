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
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

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


@contextlib.contextmanager
def ctrl_c_ends(stop: Callable[[], None]) -> Iterator[list[int]]:
    """While inside: Ctrl-C calls ``stop`` (which ends the work in its own way) and is noted in the yielded list,
    instead of raising KeyboardInterrupt wherever the main thread happens to be. For an event loop that must end
    cleanly: Textual ended quietly when the interrupt hit its loop (or printed a crash report), and `top
    --screenshot` then knew only that no screenshot was taken: exit 1, where README's table says 130."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is None:
        yield []
        return
    noted: list[int] = []
    previous = signal.getsignal(signal.SIGINT)

    def note(signum: int, frame: FrameType | None) -> None:
        noted.append(signum)
        stop()

    signal.signal(signal.SIGINT, note)
    try:
        yield noted
    finally:
        signal.signal(signal.SIGINT, previous)


def end_app_soon(app: Any) -> None:
    """From a signal handler: end a Textual ``app`` at the next turn of its loop (``call_soon_threadsafe``: the one
    asyncio call made for signal handlers); before its loop runs, from a helper thread as soon as it does."""
    import asyncio

    try:
        asyncio.get_running_loop().call_soon_threadsafe(app.exit)
    except RuntimeError:
        threading.Thread(target=_end_when_running, args=(app,), name="dflash-diag-ctrl-c", daemon=True).start()


def _end_when_running(app: Any, wait_s: float = 30.0) -> None:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            app.call_from_thread(app.exit)
            return
        except RuntimeError:  # not running yet (or any more)
            time.sleep(0.05)
