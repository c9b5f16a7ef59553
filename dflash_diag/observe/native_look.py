"""A second look, into native code, when the window names no cause: ``py-spy record --native`` for a short
window after the first, added to the observation (``Observation.native``) for the analysis to say where the
limiting threads' time goes below their Python lines (``analysis.native``).

Why after and not beside the window: native stacks stop the process while each sample is read (py-spy loads the
libraries' symbols in the first one: ~0.4 s on the 2-core box), so they are taken only when the window found nothing
to name: a report that already has its cause costs the process nothing more. ``doctor --no-native-stacks`` skips it.

``with_env_reads`` is the cheap half, for every live window (no stop of the process): the environment variables the
process has that the installed code its samples run in names (``sources.env_reads``), said beside that code.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Protocol

from dflash_diag.model import NativeProfile, NativeStack, Observation, PeerNative
from dflash_diag.model.evidence import installed_dir, is_framework_dir
from dflash_diag.model.sched import EnvRead
from dflash_diag.observe.collect import Progress
from dflash_diag.sources.env_reads import MAX_DIRS, env_reads, process_environ
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
                redactor: ProcessRedactor | None = None, peers: tuple[int, ...] = (), own: bool = True,
                peer_env: tuple[str, ...] = (),
                environ: Callable[[int], Mapping[str, str]] = process_environ) -> Observation:
    """``obs`` with a native profile of its process over ``duration_s`` more (its reason when none was taken), and
    of each process in ``peers`` (``Observation.peer_native``), all recorded at once, each with the variables
    ``peer_env`` of its environment (those that decide what its C library calls do, ``analysis.libc.MECHANISM_ENV``;
    the process's own in ``Observation.native_env``); ``own=False`` leaves the process itself alone (its report has
    its cause)."""
    recorders = ([(obs.pid, recorder(obs.pid, duration_s))] if own else []) + \
        [(pid, recorder(pid, duration_s)) for pid in peers]
    started: list[tuple[int, Recorder]] = []
    try:
        for pid, rec in recorders:
            rec.start()
            started.append((pid, rec))
        steps = max(1, int(duration_s / 0.25))
        for i in range(steps):
            sleep(duration_s / steps)
            if progress is not None:
                progress((i + 1) * duration_s / steps, duration_s)
    finally:
        profiles = {pid: rec.stop() for pid, rec in started}
    looked = tuple(_peer_native(pid, profiles[pid], peer_env, environ, redactor or redactor_for(pid))  # its own secrets
                   for pid in peers if pid in profiles)
    if not (own and obs.pid in profiles):
        return replace(obs, peer_native=obs.peer_native + looked)
    redact = redactor or redactor_for(obs.pid)
    return replace(obs, native=_redacted(profiles[obs.pid], redact), peer_native=obs.peer_native + looked,
                   native_env=_env_of(obs.pid, peer_env, environ, redact))


def _peer_native(pid: int, profile: NativeProfile, names: tuple[str, ...], environ: Callable[[int], Mapping[str, str]],
                 redactor: ProcessRedactor) -> PeerNative:
    return PeerNative(pid=pid, profile=_redacted(profile, redactor), env=_env_of(pid, names, environ, redactor))


def _env_of(pid: int, names: tuple[str, ...], environ: Callable[[int], Mapping[str, str]],
            redactor: ProcessRedactor) -> tuple[tuple[str, str], ...]:
    """The variables ``names`` of the process's environment, those it has, redacted; () where its environment
    cannot be read."""
    if not names:
        return ()
    try:
        env = environ(pid)
    except OSError:
        return ()
    return tuple((name, redactor.text(env[name])) for name in names if name in env)


def with_env_reads(obs: Observation, *, environ: Callable[[int], Mapping[str, str]] = process_environ,
                   redactor: ProcessRedactor | None = None) -> Observation:
    """``obs`` with the environment variables its process's busiest installed code reads (``env_reads_of``), read
    from outside right after the window (no stop of the process: its environ and the packages' source files)."""
    reads = env_reads_of(obs, environ=environ)
    if not reads:
        return obs
    return replace(obs, env_reads=_redacted_reads(reads, redactor or redactor_for(obs.pid)))


def env_reads_of(obs: Observation, *, environ: Callable[[int], Mapping[str, str]] = process_environ
                 ) -> tuple[EnvRead, ...]:
    """The process's environment variables that the installed code where its samples run names
    (``sources.env_reads``): the directories of the innermost installed frame of each sample, busiest first."""
    counts: Counter[str] = Counter()
    for sample in obs.stacks:
        for thread in sample.threads:
            frame = next((f for f in thread.frames if not f.native and installed_dir(f.filename) is not None), None)
            # torch's own directories are the framework's, not a choice of the program's (its settings are the
            # catalogue's: sources.sched); the analysis leaves them out too (analysis.hotspots.library_dirs)
            if frame is not None and not is_framework_dir(installed_dir(frame.filename) or ""):
                counts[frame.filename.rsplit("/", 1)[0]] += 1
    if not counts:
        return ()
    return env_reads(environ(obs.pid), [d for d, _ in counts.most_common(MAX_DIRS)])


def _redacted_reads(reads: tuple[EnvRead, ...], redactor: ProcessRedactor) -> tuple[EnvRead, ...]:
    return tuple(replace(r, value=redactor.text(r.value), reader=redactor.text(r.reader)) for r in reads)


def _redacted(profile: NativeProfile, redactor: ProcessRedactor) -> NativeProfile:
    """Frame names, file names and thread names through the process's redaction, as the window's stacks are."""
    stacks = tuple(NativeStack(os_thread_id=s.os_thread_id,
                               thread_name=redactor.maybe_text(s.thread_name),
                               frames=tuple(redactor.frame(f) for f in s.frames), count=s.count)
                   for s in profile.stacks)
    error = redactor.text(profile.error) if profile.error else None
    return replace(profile, stacks=stacks, error=error)


__all__ = ["NATIVE_LOOK_S", "env_reads_of", "native_look", "with_env_reads"]
