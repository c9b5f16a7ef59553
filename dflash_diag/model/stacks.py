"""Stack samples, as py-spy ``dump --json`` reports them, in our own immutable form."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Frame:
    """One stack frame. ``line`` is 0 when unknown; ``native`` frames come from ``--native`` dumps."""

    name: str
    filename: str
    line: int
    native: bool = False
    module: str | None = None

    @property
    def short_filename(self) -> str:
        return self.filename.rsplit("/", 1)[-1]


@dataclass(frozen=True, slots=True)
class ThreadSample:
    """One thread in one dump. ``frames[0]`` is the innermost (top) frame, as in py-spy."""

    thread_id: int  # threading.get_ident() (pthread_t)
    os_thread_id: int | None  # kernel TID == threading.get_native_id(); None if py-spy could not tell
    name: str | None
    active: bool  # the OS says the thread is on a CPU (or runnable)
    owns_gil: bool
    frames: tuple[Frame, ...]

    @property
    def top(self) -> Frame | None:
        return self.frames[0] if self.frames else None


@dataclass(frozen=True, slots=True)
class StackSample:
    """All threads of one process at one instant."""

    pid: int
    monotonic_s: float  # when the dump was taken, time.monotonic() of the sampling process
    wall_s: float  # time.time() at the same instant
    duration_s: float  # how long the dump took (py-spy's own cost)
    native: bool  # taken with --native (the process was paused)
    threads: tuple[ThreadSample, ...]


@dataclass(frozen=True, slots=True)
class NativeStack:
    """One distinct stack of one thread in a native profile, and how many of the profile's samples had it."""

    os_thread_id: int  # kernel TID
    thread_name: str | None
    frames: tuple[Frame, ...]  # innermost first; Python frames have ``native=False``, C/C++ ones ``native=True``
    count: int


@dataclass(frozen=True, slots=True)
class NativeProfile:
    """``py-spy record --native`` beside the window: each thread's stacks down into C/C++ code, counted.

    py-spy stops the process while it reads each of these samples (the first one longest: it loads the libraries'
    symbols then); ``samples`` is how many it took at ``rate_hz`` over ``duration_s``. ``error``: why there are none
    (py-spy refused or failed), said as "N/A" by whatever reads it."""

    rate_hz: float
    duration_s: float
    samples: int
    stacks: tuple[NativeStack, ...]
    error: str | None = None


@dataclass(frozen=True, slots=True)
class PeerNative:
    """A native profile of another process a thread of the watched one waits on (a pipe's busy writer), taken after
    the window when that process's CPU goes largely to the kernel: only its C frames say which calls enter it.
    ``env``: the few variables of its environment that decide what those calls do (``TZ`` for glibc's time-zone
    code), name and redacted value; a name absent from it was not set."""

    pid: int
    profile: NativeProfile
    env: tuple[tuple[str, str], ...] = ()

