"""queues: depth, put/get rates and time blocked in put (producer starved) vs get (consumer starved).

A watched ``queue.Queue`` keeps its identity: its class is swapped for a subclass whose ``put``/``get``
count each call and time the ones that will wait (full queue on put, empty on get: an unlocked peek at
``_qsize()``), about 1 us per call. Calls still blocked when
the board is published are credited up to that moment, so a consumer stuck in ``get`` for the whole
window shows as 100 % starved rather than as nothing.
"""

from __future__ import annotations

import queue as _queue
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from dflash_contract.board import PayloadKeys, ProbeName, QueueKeys
from probes._common import JsonDict

_STATS_ATTR = "_dflash_diag_stats"
_RESERVED_NAMES = frozenset({PayloadKeys.STATUS, PayloadKeys.REASON, PayloadKeys.ERRORS, PayloadKeys.HOOK_ERRORS})


@dataclass(frozen=True, kw_only=True)
class Config:
    history_points: int = 120  # depth samples kept, one per publish
    max_queues: int = 32


class _Side:
    """One direction (put or get) of one queue: counters since the last snapshot, plus calls in flight."""

    __slots__ = ("calls", "blocked_s", "threads", "inflight", "credited")

    def __init__(self) -> None:
        self.calls = 0
        self.blocked_s = 0.0  # completed time in the window (minus what earlier snapshots already credited)
        self.threads: set[int] = set()
        self.inflight: dict[int, float] = {}  # thread ident -> perf_counter at entry
        self.credited: dict[int, float] = {}  # thread ident -> seconds already counted by earlier snapshots

    def enter(self, ident: int, t0: float) -> None:
        self.inflight[ident] = t0

    def leave(self, ident: int, t0: float, t1: float, ok: bool) -> None:
        self.inflight.pop(ident, None)
        self.blocked_s += (t1 - t0) - self.credited.pop(ident, 0.0)
        self.threads.add(ident)
        if ok:
            self.calls += 1

    def drain(self, now: float) -> tuple[int, float, int, int]:
        """(calls, blocked seconds, threads involved, threads blocked right now) since the last drain."""
        blocked = self.blocked_s
        for ident, t0 in list(self.inflight.items()):
            total = now - t0
            blocked += total - self.credited.get(ident, 0.0)
            self.credited[ident] = total
        threads = len(self.threads | set(self.inflight))
        out = (self.calls, max(0.0, blocked), threads, len(self.inflight))
        self.calls, self.blocked_s = 0, 0.0
        self.threads = set()
        return out


class QueueStats:
    def __init__(self, name: str, q: _queue.Queue, base: type, history_points: int) -> None:
        self.name = name
        self.queue = q
        self.base = base
        self.lock = threading.Lock()
        self.put = _Side()
        self.get = _Side()
        self.depth_history: deque[int] = deque(maxlen=history_points)
        self.last_drain_s = time.perf_counter()


_CLASS_CACHE: dict[type, type] = {}


def _watched_class(base: type) -> type:
    cls = _CLASS_CACHE.get(base)
    if cls is not None:
        return cls
    base_put = base.put  # type: ignore[attr-defined]
    base_get = base.get  # type: ignore[attr-defined]

    def put(self: Any, item: Any, block: bool = True, timeout: float | None = None) -> None:
        st: QueueStats | None = self.__dict__.get(_STATS_ATTR)
        if st is None:
            return base_put(self, item, block, timeout)
        ident = threading.get_ident()
        if not (block and 0 < self.maxsize <= self._qsize()):
            # Will not wait (an unlocked peek, fine for accounting): count it, time nothing.
            base_put(self, item, block, timeout)
            # No lock on this path: under the GIL a lost increment is possible but rare, and only a count.
            st.put.calls += 1
            st.put.threads.add(ident)
            return
        t0 = time.perf_counter()
        st.put.enter(ident, t0)
        ok = False
        try:
            base_put(self, item, block, timeout)
            ok = True
        finally:
            t1 = time.perf_counter()
            with st.lock:
                st.put.leave(ident, t0, t1, ok)

    def get(self: Any, block: bool = True, timeout: float | None = None) -> Any:
        st: QueueStats | None = self.__dict__.get(_STATS_ATTR)
        if st is None:
            return base_get(self, block, timeout)
        ident = threading.get_ident()
        if not block or self._qsize():
            item = base_get(self, block, timeout)
            st.get.calls += 1
            st.get.threads.add(ident)
            return item
        t0 = time.perf_counter()
        st.get.enter(ident, t0)
        ok = False
        try:
            item = base_get(self, block, timeout)
            ok = True
            return item
        finally:
            t1 = time.perf_counter()
            with st.lock:
                st.get.leave(ident, t0, t1, ok)

    cls = type(f"Watched{base.__name__}", (base,), {"put": put, "get": get, "__module__": __name__})
    _CLASS_CACHE[base] = cls
    return cls


class QueuesProbe:
    name = "queues"

    def __init__(self, config: Config) -> None:
        self.config = config
        self._queues: dict[str, QueueStats] = {}
        self._lock = threading.Lock()

    def watch(self, name: str, q: _queue.Queue) -> _queue.Queue:
        """Instrument ``q`` in place and return it (same object: other references see the same queue)."""
        existing = q.__dict__.get(_STATS_ATTR) if hasattr(q, "__dict__") else None
        if existing is not None:
            return q
        if name in _RESERVED_NAMES:
            name = f"{name}_queue"
        with self._lock:
            taken, n = name, 2
            while name in self._queues and self._queues[name].queue is not q:
                name, n = f"{taken}#{n}", n + 1  # another queue of that name: both keep their readings
            if len(self._queues) >= self.config.max_queues and name not in self._queues:
                return q
            base = type(q)
            stats = QueueStats(name, q, base, self.config.history_points)
            try:
                q.__class__ = _watched_class(base)
            except TypeError:
                # A class with a different layout (__slots__): depth is still readable, rates are not.
                stats.base = base
            else:
                q.__dict__[_STATS_ATTR] = stats
            self._queues[name] = stats
        return q

    def snapshot(self, now_s: float) -> JsonDict:
        out: dict[str, JsonDict] = {}
        for name, st in list(self._queues.items()):
            out[name] = self._one(st)
        # docs/board.md: queue names are the keys of the payload, next to "status".
        return {PayloadKeys.STATUS: "ok", **out}

    def _one(self, st: QueueStats) -> JsonDict:
        now = time.perf_counter()
        with st.lock:
            window_s = max(1e-6, now - st.last_drain_s)
            st.last_drain_s = now
            puts, put_blocked_s, producers, put_waiting = st.put.drain(now)
            gets, get_blocked_s, consumers, get_waiting = st.get.drain(now)
        depth = st.queue.qsize()
        st.depth_history.append(depth)
        hist = list(st.depth_history)
        return {
            QueueKeys.DEPTH: depth,
            QueueKeys.MAXSIZE: getattr(st.queue, "maxsize", 0),
            QueueKeys.PUTS_PER_S: puts / window_s,
            QueueKeys.GETS_PER_S: gets / window_s,
            QueueKeys.PUT_BLOCKED_SHARE: min(1.0, put_blocked_s / (window_s * max(1, producers))),
            QueueKeys.GET_BLOCKED_SHARE: min(1.0, get_blocked_s / (window_s * max(1, consumers))),
            QueueKeys.PUT_BLOCKED_S: put_blocked_s,
            QueueKeys.GET_BLOCKED_S: get_blocked_s,
            QueueKeys.PRODUCERS: producers,
            QueueKeys.CONSUMERS: consumers,
            QueueKeys.PUT_WAITING: put_waiting,
            QueueKeys.GET_WAITING: get_waiting,
            QueueKeys.WINDOW_S: window_s,
            QueueKeys.DEPTH_HISTORY: hist,
            QueueKeys.DEPTH_MEAN: sum(hist) / len(hist),
            QueueKeys.INSTRUMENTED: _STATS_ATTR in getattr(st.queue, "__dict__", {}),
        }

    def close(self) -> None:
        with self._lock:
            for st in self._queues.values():
                getattr(st.queue, "__dict__", {}).pop(_STATS_ATTR, None)
                try:
                    st.queue.__class__ = st.base
                except TypeError:
                    pass


# What the probe registry (``probes/registry.py``) reads of this module: its board name, its Config, its class.
NAME = ProbeName.QUEUES
PROBE = QueuesProbe
