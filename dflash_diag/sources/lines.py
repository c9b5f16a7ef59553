"""Source lines of the frames py-spy reports, read from disk (bounded, regular files only).

The classifier needs the text of the innermost line: ``.item()``, ``time.sleep(``, ``q.get(`` are C calls that
leave no Python frame. The file on disk may differ from what the process runs (stale code): the text is a hint,
never the only evidence. :class:`SourceFiles` is the one cache of program files on disk: it serves these line
lookups and the outside evidence's parsed files (``sources/outside.py``) alike.
"""

from __future__ import annotations

import os
import stat
from collections import OrderedDict
from collections.abc import Callable, Container, Iterable, Iterator, Sequence
from typing import Generic, TypeVar

from dflash_diag.model import Frame, StackSample

MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_FILES = 512
# What is shown of a source line, and of a call or a lock's expression in it. The raw text is read up to RAW_SLACK
# times that and cut only once redacted (ProcessRedactor): cut first, a password just past the cut would lose the
# context the rules need (the ``@`` of a URL, its quotes) and its first part would survive.
MAX_LINE_CHARS = 400
MAX_SNIPPET_CHARS = 120
MAX_CALL_TEXT = 60
RAW_SLACK = 4
RAW_LINE_CHARS = RAW_SLACK * MAX_LINE_CHARS
T = TypeVar("T")


class SourceFiles(Generic[T]):
    """Source files read off disk, each turned once into a ``T`` by ``build(path, text)`` and kept while its mtime
    holds: the one cache of program files (the classifier's line lookups, the outside evidence's parsed files).

    Only regular files of at most ``MAX_FILE_BYTES`` are read (never a FIFO or a device); least recently used
    files go first past ``max_files``; a file that cannot be read is not cached (the next call tries again).
    """

    def __init__(self, build: Callable[[str, str], T | None], max_files: int = MAX_FILES) -> None:
        self._build = build
        self._files: OrderedDict[str, tuple[float, T]] = OrderedDict()
        self._max_files = max_files

    def get(self, path: str) -> tuple[T | None, float | None, bool]:
        """(what ``build`` made of the file or None, its mtime or None, whether it exists)."""
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None, None, False
        except OSError:
            return None, None, True
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE_BYTES:
            return None, st.st_mtime, True
        cached = self._files.get(path)
        if cached is not None and cached[0] == st.st_mtime:
            self._files.move_to_end(path)
            return cached[1], st.st_mtime, True
        value = self._read(path)
        if value is not None:
            self._files[path] = (st.st_mtime, value)
            self._files.move_to_end(path)
            while len(self._files) > self._max_files:
                self._files.popitem(last=False)
        return value, st.st_mtime, True

    def cached(self, path: str) -> T | None:
        """What the last :meth:`get` of ``path`` kept (no disk access)."""
        entry = self._files.get(path)
        return entry[1] if entry is not None else None

    def _read(self, path: str) -> T | None:
        try:
            with open(path, "rb") as fh:
                text = fh.read(MAX_FILE_BYTES).decode("utf-8", errors="replace")
        except OSError:
            return None
        return self._build(path, text)


def _split_lines(path: str, text: str) -> tuple[str, ...]:
    return tuple(text.splitlines())


class LineCache:
    """``cache(filename, line) -> str | None``: a line's text from :class:`SourceFiles`; unreadable or odd files,
    relative paths and lines past the end answer None."""

    def __init__(self, max_files: int = MAX_FILES) -> None:
        self._files: SourceFiles[tuple[str, ...]] = SourceFiles(_split_lines, max_files)

    def __call__(self, filename: str, line: int) -> str | None:
        if line <= 0 or not filename.startswith("/"):
            return None
        lines = self._files.get(filename)[0]
        if lines is None or line > len(lines):
            return None
        return lines[line - 1].strip()[:RAW_LINE_CHARS]  # raw: the redactor cuts it to MAX_LINE_CHARS


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
