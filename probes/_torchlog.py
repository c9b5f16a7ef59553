"""Taps on torch's logging artifacts that need no TORCH_LOGS and leave the user's logging as it was.

A tap enables the artifact in torch's ``log_state`` (so torch formats the message at all), lowers the
artifact logger to DEBUG and adds a filter that captures every record. Records below WARNING that the
user did not ask for are swallowed by the filter, so nothing new reaches torch's stderr handler; records
the user would have seen anyway (WARNING and up, or an artifact the user enabled) pass through.

A filter, not ``propagate=False``: torch's lazy ``_init_logs()`` resets propagation, and any later
``torch._logging.set_logs()`` clears ``log_state``; ``arm()`` is re-run at every publish to re-assert.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

from probes._common import HookGuard, loaded_module

# Artifacts this package enabled: artifact -> (generation it was enabled in, taps relying on it). The
# generation counts resets of torch's log state (set_logs() clears it): after one, an enabled artifact is
# the user's choice, and its records must reach the user.
_OURS: dict[str, list[int]] = {}
_GENERATION = [0]
# Taps whose filter is on their logger now: when the last one is disarmed, the log-state wrapper goes too.
_ARMED: set[int] = set()


def _watch_log_state_resets(state: object) -> None:
    """Count ``log_state.clear()`` calls (torch._logging.set_logs makes one) with an instance wrapper."""
    if getattr(state, "_dflash_diag_wrapped", False):
        return
    original = state.clear  # type: ignore[attr-defined]

    def clear() -> None:
        _GENERATION[0] += 1
        original()

    state.clear = clear  # type: ignore[attr-defined]
    state._dflash_diag_wrapped = True  # type: ignore[attr-defined]


def _unwatch_log_state_resets() -> None:
    """Remove the instance wrapper of ``log_state.clear`` (the class's method shows through again)."""
    internal = sys.modules.get("torch._logging._internal")
    state = getattr(internal, "log_state", None)
    if state is None or not getattr(state, "_dflash_diag_wrapped", False):
        return
    for attr in ("clear", "_dflash_diag_wrapped"):
        try:
            delattr(state, attr)
        except AttributeError:
            pass


class ArtifactTap:
    def __init__(
        self,
        logger_name: str,
        artifact: str | None,
        on_record: Callable[[logging.LogRecord], None],
        guard: HookGuard,
    ) -> None:
        self.logger_name = logger_name
        self.artifact = artifact
        self.on_record = on_record
        self.guard = guard
        self._we_enabled = False
        self._generation = -1
        self._level_before: int | None = None  # the logger's level before we lowered it to DEBUG
        self._logger = logging.getLogger(logger_name)

    def _state(self) -> object | None:
        internal = loaded_module("torch._logging._internal")
        return None if internal is None else internal.log_state

    def arm(self) -> None:
        lg = self._logger
        if self._filter not in lg.filters:
            lg.addFilter(self._filter)
        _ARMED.add(id(self))
        state = self._state()
        if self.artifact is None or state is None:
            return
        _watch_log_state_resets(state)
        gen = _GENERATION[0]
        if self._we_enabled and self._generation != gen:
            self._release()  # the user reset torch's logging since: re-decide below
        if not self._we_enabled:
            ours = _OURS.get(self.artifact)
            if state.is_artifact_enabled(self.artifact) and not (ours and ours[0] == gen):  # type: ignore[attr-defined]
                return  # the user enabled it (TORCH_LOGS / set_logs): they see it, we only listen
            if not ours or ours[0] != gen:
                _OURS[self.artifact] = ours = [gen, 0]
            ours[1] += 1
            self._we_enabled, self._generation = True, gen
            state.enable_artifact(self.artifact)  # type: ignore[attr-defined]
        if lg.level != logging.DEBUG:
            if self._level_before is None:
                self._level_before = lg.level
            lg.setLevel(logging.DEBUG)

    def _swallow(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING or not self._we_enabled:
            return False
        if self._generation == _GENERATION[0]:
            return True
        state = self._state()  # reset since we enabled it: the user's settings decide
        return state is None or not state.is_artifact_enabled(self.artifact)  # type: ignore[attr-defined]

    def _filter(self, record: logging.LogRecord) -> bool:
        try:
            self.on_record(record)
            return not self._swallow(record)
        except Exception as exc:  # never into the program's logging call
            self.guard.failed(exc)
            return True

    def _release(self) -> None:
        self._we_enabled = False
        reset_since = self._generation != _GENERATION[0]  # torch's log state was reset: settings are the user's
        if self._level_before is not None and not reset_since:
            self._logger.setLevel(self._level_before)  # each tap lowered its own logger: each restores it
        self._level_before = None
        ours = _OURS.get(self.artifact or "")
        if ours is None or ours[0] != self._generation:
            return
        ours[1] -= 1
        if ours[1] <= 0:
            del _OURS[self.artifact or ""]
            if reset_since:
                return
            state = self._state()
            if state is not None:
                state.artifact_names.discard(self.artifact)  # type: ignore[attr-defined]

    def disarm(self) -> None:
        lg = self._logger
        if self._filter in lg.filters:
            lg.removeFilter(self._filter)
        if self._we_enabled:
            self._release()
        _ARMED.discard(id(self))
        if not _ARMED:
            _unwatch_log_state_resets()


def arm_taps(taps: list[ArtifactTap], guard: HookGuard) -> None:
    """(Re-)arm every tap; private torch logging APIs differ across versions, so a failure is counted."""
    for tap in taps:
        try:
            tap.arm()
        except Exception as exc:
            guard.failed(exc)


def register_compile_start(on_start: Callable[[object], None], guard: HookGuard) -> bool:
    """Register ``on_start`` with dynamo's compile-start callbacks once ``torch._dynamo`` is loaded.

    Returns True once the registration was attempted (do not try again), False while dynamo is not loaded."""
    callback = loaded_module("torch._dynamo.callback")
    if callback is None:
        return False
    try:
        callback.callback_handler.register_start_callback(on_start)
    except Exception as exc:
        guard.failed(exc)
    return True


def unregister_compile_start(on_start: Callable[[object], None]) -> None:
    """Undo :func:`register_compile_start` (a callback that is already gone is fine)."""
    callback = sys.modules.get("torch._dynamo.callback")
    if callback is None:
        return
    try:
        callback.callback_handler.remove_start_callback(on_start)
    except ValueError:
        pass
