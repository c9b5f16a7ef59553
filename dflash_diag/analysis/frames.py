"""The frames of a stack sample that are the program's own (not the standard library, not installed packages, not
code torch generates, not the probes): where a wait or a hot spot is named. Pure."""

from __future__ import annotations

from dflash_diag.model.evidence import is_library_file
from dflash_diag.model.stacks import Frame, ThreadSample


def user_frames(thread: ThreadSample) -> tuple[Frame, ...]:
    """The program's own Python frames (not the standard library, not installed packages), innermost first."""
    return tuple(f for f in thread.frames if not f.native and not is_library_file(f.filename))


__all__ = ["user_frames"]
