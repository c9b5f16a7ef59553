"""collectives: the sequence of torch.distributed collective calls this rank makes, numbered, with the one it is
in now.

In a job of several ranks every rank must make the same collective calls in the same order. A rank that hangs in
``all_reduce`` waits for a peer; which peer, and whether it ever entered that call, is what a job-wide diagnosis
needs: each rank's sequence number (how many collective calls it entered), the call each thread is in now and
since when, and the newest it returned from. ``dflash-diag doctor`` on the launcher compares them across ranks
(docs/jobs.md).

The probe wraps the public collective functions of ``torch.distributed`` (``all_reduce``, ``barrier``,
``broadcast``, ``all_gather``... the module attribute and the ``distributed_c10d`` one, which are the same
function) once the program has imported it. A wrapper costs two clock reads and a lock per call (2.6 us measured by
bench/collectives_probe.py), next to a collective's tens of microseconds at least; a call made inside another (``all_gather_object`` calls
``all_gather``) is not counted twice. Calls made with ``async_op=True`` return when issued: they are counted as
issued, and their wait on the work handle shows in the stacks instead. DDP's gradient all-reduce runs in C++
(its reducer) and is not seen here. The numbers line up across ranks only when every rank's probe armed before its
process group existed (``from_start``: under ``dflash-diag run`` the probes start with the interpreter); a probe
attached later numbers the calls it saw. Memory is bounded (``recent``: 32 calls). ``close()`` puts the originals back.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from dflash_contract.board import STATUS_OK, CollectivesKeys, PayloadKeys, ProbeName
from probes._common import MAX_RECENT, HookGuard, JsonDict, loaded_module, na, thread_name

# The collective (and point-to-point) calls of torch.distributed a program makes.
OPS = (
    "all_reduce", "all_gather", "all_gather_into_tensor", "all_gather_object", "reduce_scatter",
    "reduce_scatter_tensor", "broadcast", "broadcast_object_list", "reduce", "barrier", "monitored_barrier",
    "all_to_all", "all_to_all_single", "gather", "gather_object", "scatter", "scatter_object_list", "send", "recv",
    "isend", "irecv", "batch_isend_irecv",
)
_ORIGINAL = "__dflash_diag_original__"
_MODULES = ("torch.distributed", "torch.distributed.distributed_c10d")


@dataclass(frozen=True, kw_only=True)
class Config:
    max_recent: int = MAX_RECENT
    max_current: int = 64  # threads in a collective at once, listed at most


class CollectivesProbe:
    name = "collectives"

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or Config()
        self._guard = HookGuard()
        self._lock = threading.Lock()
        self._local = threading.local()
        self._patched: list[tuple[Any, str, Any]] = []  # (module, attribute, original)
        self._armed = False
        self._from_start = False  # armed before the default process group existed: no call was missed
        self._closed = False
        self._entered = 0
        self._completed = 0
        self._async = 0
        self._current: dict[int, tuple[int, str, str, float]] = {}  # thread ident -> (seq, op, thread, since wall)
        self._last: JsonDict | None = None
        self._by_op: dict[str, list[float]] = {}  # op -> [count, total ms]
        self._in_s = 0.0
        self._recent: deque[JsonDict] = deque(maxlen=self.config.max_recent)
        self._arm()

    # --- arming -------------------------------------------------------------------------------------------

    def _arm(self) -> None:
        """Wrap the collective functions once torch.distributed is fully imported (never imports it itself)."""
        if self._armed or self._closed:
            return
        dist = loaded_module("torch.distributed")
        c10d = loaded_module("torch.distributed.distributed_c10d")
        if dist is None or c10d is None or not _available(dist):
            return
        self._from_start = not _initialized(dist)
        wrapped: dict[int, Any] = {}
        for module in (dist, c10d):
            for op in OPS:
                fn = getattr(module, op, None)
                if not callable(fn) or hasattr(fn, _ORIGINAL):
                    continue
                new = wrapped.get(id(fn))
                if new is None:
                    new = wrapped[id(fn)] = self._wrap(op, fn)
                setattr(module, op, new)
                self._patched.append((module, op, fn))
        self._armed = True

    def _wrap(self, op: str, fn: Any) -> Any:
        probe = self

        @functools.wraps(fn)
        def collective(*args: Any, **kwargs: Any) -> Any:
            local = probe._local
            if getattr(local, "depth", 0) or probe._closed:
                return fn(*args, **kwargs)  # inside another collective (all_gather_object -> all_gather)
            started = probe._enter(op, bool(kwargs.get("async_op")))
            local.depth = 1
            try:
                return fn(*args, **kwargs)
            finally:
                local.depth = 0
                probe._leave(op, started)

        setattr(collective, _ORIGINAL, fn)
        return collective

    def _enter(self, op: str, is_async: bool) -> tuple[int, float, float] | None:
        try:
            ident = threading.get_ident()
            wall, mono = time.time(), time.perf_counter()
            with self._lock:
                self._entered += 1
                seq = self._entered
                if is_async:
                    self._async += 1
                if len(self._current) < self.config.max_current:
                    self._current[ident] = (seq, op, thread_name(ident), wall)
            return seq, mono, wall
        except Exception as exc:  # never into the program
            self._guard.failed(exc)
            return None

    def _leave(self, op: str, started: tuple[int, float, float] | None) -> None:
        if started is None:
            return
        try:
            seq, mono, _ = started
            took_s = time.perf_counter() - mono
            ended = time.time()
            with self._lock:
                self._completed += 1
                self._current.pop(threading.get_ident(), None)
                row = self._by_op.setdefault(op, [0, 0.0])
                row[0] += 1
                row[1] += 1e3 * took_s
                self._in_s += took_s
                self._last = {CollectivesKeys.SEQ: seq, CollectivesKeys.OP: op,
                              CollectivesKeys.DURATION_MS: round(1e3 * took_s, 3), CollectivesKeys.ENDED_WALL_S: ended}
                self._recent.append({CollectivesKeys.SEQ: seq, CollectivesKeys.OP: op,
                                     CollectivesKeys.DURATION_MS: round(1e3 * took_s, 3)})
        except Exception as exc:
            self._guard.failed(exc)

    # --- the board ----------------------------------------------------------------------------------------

    def snapshot(self, now_s: float) -> JsonDict:
        self._arm()
        if not self._armed:
            return na("torch.distributed is not imported (or not available) in this process")
        dist = loaded_module("torch.distributed")
        backend, rank, world = _group_facts(dist)
        with self._lock:
            current = [{CollectivesKeys.SEQ: seq, CollectivesKeys.OP: op, CollectivesKeys.THREAD: name,
                        CollectivesKeys.SINCE_WALL_S: since} for seq, op, name, since in self._current.values()]
            return {
                PayloadKeys.STATUS: STATUS_OK,
                CollectivesKeys.ARMED: True,
                CollectivesKeys.FROM_START: self._from_start,
                CollectivesKeys.BACKEND: backend,
                CollectivesKeys.RANK: rank,
                CollectivesKeys.WORLD_SIZE: world,
                CollectivesKeys.ENTERED: self._entered,
                CollectivesKeys.COMPLETED: self._completed,
                CollectivesKeys.ASYNC_ISSUED: self._async,
                CollectivesKeys.CURRENT: sorted(current, key=lambda c: c[CollectivesKeys.SEQ]),
                CollectivesKeys.LAST: dict(self._last) if self._last is not None else None,
                CollectivesKeys.BY_OP: {op: {CollectivesKeys.COUNT: int(c), CollectivesKeys.TOTAL_MS: round(ms, 3)}
                                        for op, (c, ms) in sorted(self._by_op.items())},
                CollectivesKeys.IN_COLLECTIVES_S: round(self._in_s, 6),
                CollectivesKeys.RECENT: list(self._recent),
                PayloadKeys.HOOK_ERRORS: self._guard.errors,
                PayloadKeys.LAST_HOOK_ERROR: self._guard.last_error,
            }

    def close(self) -> None:
        self._closed = True
        for module, op, original in reversed(self._patched):
            try:
                if hasattr(getattr(module, op, None), _ORIGINAL):
                    setattr(module, op, original)
            except Exception:
                pass
        self._patched.clear()


def _available(dist: Any) -> bool:
    try:
        return bool(dist.is_available())
    except Exception:
        return False


def _initialized(dist: Any) -> bool:
    try:
        return bool(dist.is_initialized())
    except Exception:
        return True  # cannot tell: the numbers may have missed calls


def _group_facts(dist: Any) -> tuple[str | None, int | None, int | None]:
    """The default group's backend, this rank and the world size, once the program initialised it."""
    try:
        if dist is None or not dist.is_initialized():
            return None, None, None
        return str(dist.get_backend()), int(dist.get_rank()), int(dist.get_world_size())
    except Exception:
        return None, None, None


# What the probe registry (``probes/registry.py``) reads of this module: its board name, its Config, its class.
NAME = ProbeName.COLLECTIVES
PROBE = CollectivesProbe
