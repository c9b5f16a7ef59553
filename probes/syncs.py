"""syncs: the host<->device synchronisations the program makes, counted per line (CUDA only).

With ``torch.cuda.set_sync_debug_mode("warn")`` every synchronising CUDA call torch checks (``.item()``, ``int(t)``,
``.cpu()``, ``.tolist()``, ``nonzero``, a copy to the host, ...) raises the UserWarning "called a synchronizing CUDA
operation" in the thread that made it, attributed to the Python line that made it. The probe turns the mode on only
once the program has initialised CUDA itself and while the mode is at its default (a program that set it keeps its
own), adds one warnings filter aimed at that message alone (``always``: every sync reaches the hook, not only the
first per line), and wraps ``warnings.showwarning``: a sync is counted per (file, line, thread) and shown nowhere;
every other warning goes on to the program's own ``showwarning``. ``close`` takes all three back.

Cost: a few microseconds per sync (the warning machinery; ``bench/gpu_evidence_cost.py`` measures it), nothing in
a process without CUDA (the probe never arms there). Limits: torch's check is a prototype that does not see every
sync (``torch.cuda.synchronize()`` and event waits are not reported by every version; torch.distributed and
torch.sparse are not covered), which the sampled stacks still show; the mode is process-global. A program that turns
warnings into errors (``simplefilter("error")``) would get an exception at each sync: the probe does not arm while
such a filter exists and disarms at its next check (once a second) when one appears.
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from dataclasses import dataclass
from typing import Any

from dflash_contract.board import PayloadKeys, ProbeName, SyncKeys
from probes._common import HookGuard, JsonDict, na, thread_name, torch_if_imported

SYNC_MESSAGE = "called a synchronizing CUDA operation"  # torch's text (c10/cuda/CUDAFunctions.cpp)
_OTHER = ("<other lines>", 0, "")


@dataclass(frozen=True, kw_only=True)
class Config:
    max_lines: int = 256  # (file, line, thread) rows kept; syncs at further lines count under "<other lines>"
    lines_shown: int = 8


class SyncsProbe:
    name = "syncs"

    def __init__(self, config: Config, cuda: Any = None) -> None:
        self.config = config
        self.guard = HookGuard()
        self._cuda = cuda  # torch.cuda, or a stand-in (tests)
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, int, str], int] = {}
        self._total = 0
        self._prev: tuple[float, int] | None = None  # (monotonic s, total) at the last snapshot
        self._armed = False
        self._filter: tuple[Any, ...] | None = None
        self._shown: Any = None  # the showwarning we wrapped
        self._hook: Any = None
        self._why_not = "CUDA not initialised by the program yet"

    # --- arming, from the publishing thread ---------------------------------------------------------------

    def _cuda_module(self) -> Any:
        if self._cuda is not None:
            return self._cuda
        torch = torch_if_imported()
        return getattr(torch, "cuda", None) if torch is not None else None

    def _try_arm(self) -> None:
        cuda = self._cuda_module()
        if cuda is None:
            self._why_not = "no CUDA: torch not imported"
            return
        if not cuda.is_available():
            self._why_not = "no CUDA"
            return
        if not cuda.is_initialized():
            self._why_not = "CUDA not initialised by the program yet"
            return
        if cuda.get_sync_debug_mode() != 0:
            self._why_not = "the program set torch.cuda's sync debug mode itself: left as it is"
            return
        if _error_filter():
            self._why_not = "a warnings filter turns warnings into errors: counting syncs would raise in the program"
            return
        warnings.filterwarnings("always", message=SYNC_MESSAGE, category=UserWarning)
        self._filter = warnings.filters[0]
        self._shown = warnings.showwarning
        probe, shown = self, self._shown

        def showwarning(message: Any, category: Any, filename: str, lineno: int, file: Any = None,
                        line: Any = None) -> None:
            if category is UserWarning and str(message).startswith(SYNC_MESSAGE):
                probe._count(filename, lineno)
                return
            shown(message, category, filename, lineno, file, line)

        self._hook = showwarning
        warnings.showwarning = showwarning
        cuda.set_sync_debug_mode(1)
        self._armed = True

    def _disarm(self, why: str) -> None:
        cuda = self._cuda_module()
        try:
            if cuda is not None and cuda.get_sync_debug_mode() == 1:
                cuda.set_sync_debug_mode(0)
        finally:
            if self._filter is not None:
                try:
                    warnings.filters.remove(self._filter)
                except ValueError:
                    pass  # the program reset the filters: nothing of ours left there
                _filters_mutated()
                self._filter = None
            if self._hook is not None and warnings.showwarning is self._hook:
                warnings.showwarning = self._shown
            self._hook = None
            self._armed = False
            self._why_not = why

    # --- in the program's threads: one call per sync ------------------------------------------------------

    def _count(self, filename: str, lineno: int) -> None:
        try:
            key = (filename, lineno, thread_name())
            with self._lock:
                self._total += 1
                if key in self._counts or len(self._counts) < self.config.max_lines:
                    self._counts[key] = self._counts.get(key, 0) + 1
                else:
                    self._counts[_OTHER] = self._counts.get(_OTHER, 0) + 1
        except Exception as exc:  # never into the program's .item()
            self.guard.failed(exc)

    # --- the board ------------------------------------------------------------------------------------------

    def snapshot(self, now_s: float) -> JsonDict:
        if self._armed and _error_filter(before=self._filter):
            self._disarm("a warnings filter turns warnings into errors: stopped counting syncs")
        if not self._armed:
            self._try_arm()
        if not self._armed:
            return na(self._why_not)
        now = time.monotonic()
        with self._lock:
            total = self._total
            top = sorted(self._counts.items(), key=lambda kv: -kv[1])[: self.config.lines_shown]
        per_s = None
        if self._prev is not None and now > self._prev[0]:
            per_s = (total - self._prev[1]) / (now - self._prev[0])
        self._prev = (now, total)
        return {
            PayloadKeys.STATUS: "ok",
            SyncKeys.TOTAL: total,
            SyncKeys.PER_S: None if per_s is None else round(per_s, 1),
            SyncKeys.TOP_LINES: [{SyncKeys.SITE: _site(f, n), SyncKeys.THREAD: t, SyncKeys.COUNT: c}
                                 for (f, n, t), c in top],
            PayloadKeys.HOOK_ERRORS: self.guard.errors,
        }

    def close(self) -> None:
        if self._armed:
            self._disarm("closed")


def _filters_mutated() -> None:
    """Tell the C warnings machinery the filter list changed (as ``filterwarnings`` does; renamed in 3.14)."""
    for name in ("_filters_mutated", "_filters_mutated_lock_held"):
        mutated = getattr(warnings, name, None)
        if callable(mutated):
            mutated()
            return


def _site(filename: str, lineno: int) -> str:
    if not lineno:
        return filename
    parts = filename.replace(os.sep, "/").split("/")
    return f"{'/'.join(parts[-2:])}:{lineno}"


def _error_filter(before: tuple[Any, ...] | None = None) -> bool:
    """A filter that turns the sync warning into an exception (an ``error`` action on UserWarning or a base of it,
    whatever the message), ahead of ``before`` when given (ours: a filter behind it never sees the warning)."""
    for f in list(warnings.filters):
        if before is not None and f is before:
            return False
        action, _message, category, _module, _line = f
        if action == "error" and isinstance(category, type) and issubclass(UserWarning, category):
            return True
    return False


# What the probe registry (``probes/registry.py``) reads of this module: its board name, its Config, its class.
NAME = ProbeName.SYNCS
PROBE = SyncsProbe
