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

from probes._common import HookGuard

# Artifacts this package enabled (several taps may share one, e.g. "cudagraphs"): artifact -> live taps.
_OURS: dict[str, int] = {}


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
        self._logger = logging.getLogger(logger_name)

    def arm(self) -> None:
        lg = self._logger
        if self._filter not in lg.filters:
            lg.addFilter(self._filter)
        if self.artifact is None:
            return
        internal = sys.modules.get("torch._logging._internal")
        if internal is None:
            return
        state = internal.log_state
        if not self._we_enabled:
            if state.is_artifact_enabled(self.artifact) and self.artifact not in _OURS:
                return  # the user enabled it (TORCH_LOGS / set_logs): they see it, we only listen
            _OURS[self.artifact] = _OURS.get(self.artifact, 0) + 1
            self._we_enabled = True
        if not state.is_artifact_enabled(self.artifact):
            state.enable_artifact(self.artifact)  # again after a user's set_logs() cleared it
        if lg.level != logging.DEBUG:
            lg.setLevel(logging.DEBUG)

    def _filter(self, record: logging.LogRecord) -> bool:
        try:
            self.on_record(record)
        except Exception as exc:  # never into the program's logging call
            self.guard.failed(exc)
        return not (self._we_enabled and record.levelno < logging.WARNING)

    def disarm(self) -> None:
        lg = self._logger
        if self._filter in lg.filters:
            lg.removeFilter(self._filter)
        if self._we_enabled and self.artifact is not None:
            self._we_enabled = False
            _OURS[self.artifact] -= 1
            lg.setLevel(logging.NOTSET)
            if _OURS[self.artifact] <= 0:
                del _OURS[self.artifact]
                internal = sys.modules.get("torch._logging._internal")
                if internal is not None:
                    internal.log_state.artifact_names.discard(self.artifact)
