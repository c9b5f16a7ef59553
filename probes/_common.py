"""Pieces every probe shares: the probe protocol, error counting, thread names, JSON-safe values.

Standard library only, so ``import probes`` stays cheap and never imports torch by itself.
"""

from __future__ import annotations

import gc
import math
import sys
import threading
from collections.abc import Mapping
from typing import Any, Protocol

from dflash_contract.board import STATUS_ERROR, STATUS_NA, PayloadKeys

JsonDict = dict[str, Any]

# Bounded lists on the board (docs/board.md: recent_* lists hold at most 32 entries, newest last).
MAX_RECENT = 32


class Probe(Protocol):
    """What the session needs from a probe. ``snapshot`` runs on the publishing thread."""

    name: str

    def snapshot(self, now_s: float) -> JsonDict: ...

    def close(self) -> None: ...


def na(reason: str) -> JsonDict:
    return {PayloadKeys.STATUS: STATUS_NA, PayloadKeys.REASON: reason}


def error_payload(reason: str, errors: int) -> JsonDict:
    return {PayloadKeys.STATUS: STATUS_ERROR, PayloadKeys.REASON: reason, PayloadKeys.ERRORS: errors}


class HookGuard:
    """Counts failures of code that runs inside the watched program (log filters, patched functions, hooks).

    Such code must never raise into training: it catches everything, counts it, and the probe reports the
    count (``hook_errors``) and the last message on the board.
    """

    __slots__ = ("errors", "last_error")

    def __init__(self) -> None:
        self.errors = 0
        self.last_error: str | None = None

    def failed(self, exc: BaseException) -> None:
        self.errors += 1
        self.last_error = f"{type(exc).__name__}: {exc}"[:300]


def fingerprint_view(tensor: Any, elems: int) -> Any:
    """A view of ``elems`` elements strided over ``tensor`` (no copy; None for a non-contiguous one): compared
    exactly between two reads, it says whether the tensor's values changed.

    The stride is coprime with the size of one row (the product of every dimension but the first), so the elements
    fall in as many different columns (input units) as there are elements, spread over the rows. A plain
    ``numel // elems`` stride is a multiple of the row whenever the first dimension is a multiple of ``elems``
    (any ``[64k, n]`` weight): every element then lies in column 0, and a weight whose first input unit gets no
    gradient (a dead ReLU unit feeding a down projection, a padding slot) read as unchanged while it trained. The
    same tensor shape always gives the same positions: a gradient's view lines up with its weight's."""
    flat = tensor.detach()
    if not flat.is_contiguous():
        return None
    row = math.prod(flat.shape[1:]) if flat.dim() >= 2 else 1
    flat = flat.view(-1)
    n = flat.numel()
    return flat if n <= elems else flat[:: spread_stride(n, elems, row)][:elems]


def spread_stride(n: int, elems: int, row: int) -> int:
    """The largest stride that fits ``elems`` elements in ``n`` and is coprime with ``row`` (1 always is)."""
    stride = max(1, n // elems)
    while stride > 1 and math.gcd(stride, row) != 1:
        stride -= 1
    return stride


def current_frames() -> dict[int, Any]:
    """``sys._current_frames()`` with the cyclic GC held off for the call.

    CPython 3.11 builds the result while it holds the runtime's thread-list lock; an allocation there can start a
    collection whose finalizers take a lock that a thread on its way out holds while it waits for that same
    thread-list lock: the program deadlocks (python/cpython#106883, seen here in the test process while attach
    discovered its objects). With the collector off for the call nothing runs a finalizer there."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return sys._current_frames()
    finally:
        if was_enabled:
            gc.enable()


def thread_name(ident: int | None = None) -> str:
    """Name of a Python thread without creating ``Dummy-N`` objects (threading.current_thread() would)."""
    ident = threading.get_ident() if ident is None else ident
    t = threading._active.get(ident)  # type: ignore[attr-defined]  # the registry current_thread() reads
    return t.name if t is not None else f"thread-{ident}"


def thread_tids() -> dict[int, str]:
    """Kernel TID -> Python thread name, for every live Python thread."""
    out: dict[int, str] = {}
    for t in threading.enumerate():
        tid = t.native_id
        if tid is not None:
            out[tid] = t.name
    return out


def json_safe(value: Any, depth: int = 0) -> Any:
    """A JSON-encodable copy: non-finite floats -> None, unknown objects -> str, bounded nesting."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if depth > 8:
        return str(value)[:200]
    if isinstance(value, Mapping):
        return {str(k): json_safe(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [json_safe(v, depth + 1) for v in value]
    return str(value)[:500]


def loaded_module(name: str) -> Any | None:
    """``sys.modules[name]`` once its import has finished, else None.

    A module is in ``sys.modules`` from the moment its import *starts*. The board thread that reads it then can
    find it half-executed (torch.utils.checkpoint without ``CheckpointFunction`` yet): patching or reading it
    then fails, and a probe that took that failure as final stayed unarmed for the whole run (seen on a loaded
    CI box: a 4-step trainer run counted no checkpoint call). importlib marks a module being executed with
    ``__spec__._initializing`` (the flag its own import lock consults), so wait for the next publish instead."""
    module = sys.modules.get(name)
    if module is None or getattr(getattr(module, "__spec__", None), "_initializing", False):
        return None
    return module


def torch_if_imported() -> Any | None:
    """The torch module when the program already imported it: probes never import torch first."""
    return loaded_module("torch")
