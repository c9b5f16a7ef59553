"""Source lines of the frames py-spy reports, read from disk (bounded, regular files only).

The classifier needs the text of the innermost line: ``.item()``, ``time.sleep(``, ``q.get(`` are C calls that
leave no Python frame. The file on disk may differ from what the process runs (stale code): the text is a hint,
never the only evidence.
"""

from __future__ import annotations

import os
import stat
from collections import OrderedDict
from collections.abc import Callable, Container, Iterable, Iterator, Sequence

from dflash_diag.model import Frame, StackSample

MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_FILES = 512
MAX_LINE_CHARS = 400


class LineCache:
    """``cache(filename, line) -> str | None``: LRU over files; unreadable or odd files answer None."""

    def __init__(self, max_files: int = MAX_FILES) -> None:
        self._files: OrderedDict[str, tuple[float, tuple[str, ...]] | None] = OrderedDict()
        self._max_files = max_files

    def __call__(self, filename: str, line: int) -> str | None:
        if line <= 0 or not filename.startswith("/"):
            return None
        lines = self._lines(filename)
        if lines is None or line > len(lines):
            return None
        return lines[line - 1].strip()[:MAX_LINE_CHARS]

    def _lines(self, filename: str) -> tuple[str, ...] | None:
        try:
            st = os.stat(filename)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE_BYTES:
            return None
        cached = self._files.get(filename)
        if cached is not None and cached[0] == st.st_mtime:
            self._files.move_to_end(filename)
            return cached[1]
        try:
            with open(filename, "rb") as fh:
                text = fh.read(MAX_FILE_BYTES).decode("utf-8", errors="replace")
        except OSError:
            return None
        lines = tuple(text.splitlines())
        self._files[filename] = (st.st_mtime, lines)
        self._files.move_to_end(filename)
        while len(self._files) > self._max_files:
            self._files.popitem(last=False)
        return lines


LINE_FRAMES = 3  # source text is recorded for this many innermost Python frames per thread


def read_source_lines(
    threads_frames: Iterable[Sequence[Frame]],
    lookup: Callable[[str, int], str | None],
    *,
    known: Container[str] = frozenset(),
    frames_per_thread: int = LINE_FRAMES,
) -> dict[str, str]:
    """``{"file:line": text}`` for the innermost ``frames_per_thread`` Python frames of each stack, skipping keys
    in ``known`` (already read). The one place that decides which lines an Observation records."""
    out: dict[str, str] = {}
    for frames in threads_frames:
        n = 0
        for frame in frames:
            if frame.native:
                continue
            key = f"{frame.filename}:{frame.line}"
            if key not in known and key not in out:
                text = lookup(frame.filename, frame.line)
                if text is not None:
                    out[key] = text
            n += 1
            if n >= frames_per_thread:
                break
    return out


def stack_frames(stacks: Iterable[StackSample]) -> Iterator[Sequence[Frame]]:
    """Every thread's frames of every sample (the input of :func:`read_source_lines`)."""
    for sample in stacks:
        for thread in sample.threads:
            yield thread.frames
