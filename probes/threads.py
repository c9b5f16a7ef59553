"""threads: which threads died, of what, and when; which threads are gone since an earlier publish.

A pipeline whose consumer threads all died of an exception does not crash: its producers block in ``put``
forever and the process looks merely slow. ``threading.excepthook`` is the one place every uncaught exception
of a ``threading.Thread`` passes through: the probe wraps it (the previous hook still runs, so the program's
own output is unchanged), records the thread's name, the exception's last line and where it was raised, and
publishes them. Between publishes it also remembers which threads were alive, so a thread that ended without
an exception (returned early, killed by a ``break``) is listed as gone with the time it was last seen.

Costs nothing while no thread dies; memory is bounded (``max_deaths``, ``max_gone``).
"""

from __future__ import annotations

import sysconfig
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass
from typing import Any

from dflash_contract.board import STATUS_OK, PayloadKeys, ProbeName, ThreadsKeys
from probes._common import HookGuard, JsonDict

_MESSAGE_CHARS = 300


def _library_dirs() -> tuple[str, ...]:
    """The interpreter's standard library and installed packages: not the program's own code."""
    paths = sysconfig.get_paths()
    return tuple(p for p in {paths.get("stdlib"), paths.get("purelib"), paths.get("platlib")} if p)


def _short(path: str) -> str:
    return path.rsplit("/", 1)[-1]


@dataclass(frozen=True, kw_only=True)
class Config:
    max_deaths: int = 32
    max_gone: int = 64


class ThreadsProbe:
    name = "threads"

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or Config()
        self._guard = HookGuard()
        self._lock = threading.Lock()
        self._deaths: deque[JsonDict] = deque(maxlen=self.config.max_deaths)
        self._deaths_total = 0
        self._gone: deque[JsonDict] = deque(maxlen=self.config.max_gone)
        self._alive: dict[int, tuple[str, int | None]] = {}  # ident -> (name, native id), at the last publish
        self._previous: Any = threading.excepthook
        self._closed = False
        threading.excepthook = self._hook

    def _hook(self, args: Any) -> None:
        try:
            self._record(args)
        except Exception as exc:  # never into the program: its own hook must still run
            self._guard.failed(exc)
        self._previous(args)

    def _record(self, args: Any) -> None:
        if self._closed or args.exc_type is SystemExit:
            return  # SystemExit in a thread is a quiet exit, as in threading's own hook
        thread = args.thread
        where = ""
        tb = traceback.extract_tb(args.exc_traceback) if args.exc_traceback is not None else []
        if tb:
            last = tb[-1]
            where = f"{_short(last.filename)}:{last.lineno} in {last.name}"
            own = next((f for f in reversed(tb) if not f.filename.startswith(_library_dirs())), None)
            if own is not None and own is not last:
                where = f"{_short(own.filename)}:{own.lineno} in {own.name} (raised in {where})"
        message = "".join(traceback.format_exception_only(args.exc_type, args.exc_value)).strip().splitlines()
        entry = {
            ThreadsKeys.THREAD: thread.name if thread is not None else "unknown",
            ThreadsKeys.NATIVE_ID: getattr(thread, "native_id", None),
            ThreadsKeys.EXCEPTION: (message[-1] if message else getattr(args.exc_type, "__name__", "?"))[:_MESSAGE_CHARS],
            ThreadsKeys.WHERE: where[:_MESSAGE_CHARS],
            ThreadsKeys.WALL_TIME_S: time.time(),
        }
        with self._lock:
            self._deaths.append(entry)
            self._deaths_total += 1

    def snapshot(self, now_s: float) -> JsonDict:
        now_wall = time.time()
        alive = {t.ident: (t.name, t.native_id) for t in threading.enumerate() if t.ident is not None}
        with self._lock:
            for ident, (name, native_id) in self._alive.items():
                if ident not in alive:
                    self._gone.append({ThreadsKeys.THREAD: name, ThreadsKeys.NATIVE_ID: native_id,
                                       ThreadsKeys.LAST_SEEN_WALL_S: self._seen_s})
            self._alive = alive
            self._seen_s = now_wall
            return {
                PayloadKeys.STATUS: STATUS_OK,
                ThreadsKeys.ALIVE: len(alive),
                ThreadsKeys.DEATHS: list(self._deaths),
                ThreadsKeys.DEATHS_TOTAL: self._deaths_total,
                ThreadsKeys.GONE: list(self._gone),
                PayloadKeys.HOOK_ERRORS: self._guard.errors,
                PayloadKeys.LAST_HOOK_ERROR: self._guard.last_error,
            }

    _seen_s: float = 0.0

    def close(self) -> None:
        self._closed = True
        if threading.excepthook == self._hook:
            threading.excepthook = self._previous


# What the probe registry (``probes/registry.py``) reads of this module: its board name, its Config, its class.
NAME = ProbeName.THREADS
PROBE = ThreadsProbe
