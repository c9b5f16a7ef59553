"""A second look, into native code, when the window names no cause: ``py-spy record --native`` for a short
window after the first, added to the observation (``Observation.native``) for the analysis to say where the
limiting threads' time goes below their Python lines (``analysis.native``).

Why after and not beside the window: native stacks stop the process while each sample is read (py-spy loads the
libraries' symbols in the first one: ~0.4 s on the 2-core box), so they are taken only when the window found nothing
to name: a report that already has its cause costs the process nothing more. ``doctor --no-native-stacks`` skips it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from dflash_diag.model import NativeProfile, NativeStack, Observation
from dflash_diag.observe.collect import Progress
from dflash_diag.sources.native_profile import NativeRecorder
from dflash_diag.sources.redaction import ProcessRedactor, redactor_for

NATIVE_LOOK_S = 2.5  # 1.5 s gave a conv trainer 8 samples on the quiet box (its first one loads the symbols)


class Recorder(Protocol):
    def start(self) -> None: ...

    def stop(self) -> NativeProfile: ...


RecorderFactory = Callable[[int, float], Recorder]


def _py_spy_recorder(pid: int, duration_s: float) -> Recorder:
    return NativeRecorder(pid, max_s=duration_s)


def native_look(obs: Observation, *, duration_s: float = NATIVE_LOOK_S, progress: Progress | None = None,
                recorder: RecorderFactory = _py_spy_recorder, sleep: Callable[[float], None] = time.sleep,
                redactor: ProcessRedactor | None = None) -> Observation:
    """``obs`` with a native profile of its process over ``duration_s`` more (its reason when none was taken)."""
    rec = recorder(obs.pid, duration_s)
    rec.start()
    try:
        steps = max(1, int(duration_s / 0.25))
        for i in range(steps):
            sleep(duration_s / steps)
            if progress is not None:
                progress((i + 1) * duration_s / steps, duration_s)
    finally:
        profile = rec.stop()
    return replace(obs, native=_redacted(profile, redactor or redactor_for(obs.pid)))


def _redacted(profile: NativeProfile, redactor: ProcessRedactor) -> NativeProfile:
    """Frame names, file names and thread names through the process's redaction, as the window's stacks are."""
    stacks = tuple(NativeStack(os_thread_id=s.os_thread_id,
                               thread_name=redactor.maybe_text(s.thread_name),
                               frames=tuple(redactor.frame(f) for f in s.frames), count=s.count)
                   for s in profile.stacks)
    error = redactor.text(profile.error) if profile.error else None
    return replace(profile, stacks=stacks, error=error)


__all__ = ["NATIVE_LOOK_S", "native_look"]
