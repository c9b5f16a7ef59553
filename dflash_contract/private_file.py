"""Private files, read and written one way by the probes and the tool alike: the board, the attach protocol's request
and result, a kernel recording's outcome and trace, the files of a bundle.

- :func:`read_private`: the bytes of a regular file of this user that no one else may read (no group or other
  permission bits), bounded; never through a symlink (``O_NOFOLLOW``), never blocking on a FIFO. ``None`` when it
  does not exist; :class:`NotPrivate` or :class:`TooLarge` when it is not what we write.
- :func:`open_private`: the same checks, the file left open for reading as a stream (a trace too large to hold
  twice in memory).
- :func:`create_private`: a new file, 0600, created with ``O_EXCL|O_NOFOLLOW`` (never through a planted file or
  symlink), written whole or removed.
- :func:`write_private_atomic`: the same through a temporary sibling, then renamed over ``path``: a reader sees
  the old content or the new, never a mix.

Standard library only. ``probes/_attach_boot.py`` runs before anything of ours is importable in a program and keeps
a copy of its own; a test holds the copy to these flags and checks.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import BinaryIO

CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
MODE = 0o600
NOT_PRIVATE_BITS = 0o077  # any group or other permission
READ_CHUNK_BYTES = 16 << 20

PathLike = str | os.PathLike[str]


class NotPrivate(ValueError):
    """Not a regular file of this user that only this user may read: never read (someone else could have written
    it, or could read what we would write there)."""


class TooLarge(ValueError):
    def __init__(self, size_bytes: int, limit_bytes: int) -> None:
        super().__init__(f"{size_bytes} bytes, over the {limit_bytes} read")
        self.size_bytes = size_bytes
        self.limit_bytes = limit_bytes


def read_private(path: PathLike, limit_bytes: int) -> bytes | None:
    """The whole content of the private file ``path`` (at most ``limit_bytes``), or None when there is none."""
    try:
        fd = os.open(path, READ_FLAGS)
    except FileNotFoundError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & NOT_PRIVATE_BITS:
            raise NotPrivate(f"{path} is not a private regular file of this user")
        if st.st_size > limit_bytes:
            raise TooLarge(st.st_size, limit_bytes)
        chunks: list[bytes] = []
        left = limit_bytes + 1  # one more than allowed: a file that grew while it was read is caught too
        while left > 0:
            chunk = os.read(fd, min(left, READ_CHUNK_BYTES))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit_bytes:
        raise TooLarge(len(data), limit_bytes)
    return data


def open_private(path: PathLike, limit_bytes: int) -> BinaryIO | None:
    """The private file ``path`` (at most ``limit_bytes`` when opened), open for reading, or None when there is none;
    :class:`NotPrivate` or :class:`TooLarge` as :func:`read_private`. The caller reads at most ``limit_bytes + 1``."""
    try:
        fd = os.open(path, READ_FLAGS)
    except FileNotFoundError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & NOT_PRIVATE_BITS:
            raise NotPrivate(f"{path} is not a private regular file of this user")
        if st.st_size > limit_bytes:
            raise TooLarge(st.st_size, limit_bytes)
        os.set_blocking(fd, True)  # opened without blocking only so that a FIFO could not hold the open
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def create_private(path: PathLike, data: bytes, *, fsync: bool = False) -> None:
    """Create ``path`` 0600 (``O_EXCL|O_NOFOLLOW``: FileExistsError rather than through what is there), written
    whole, or not at all (removed when the write fails)."""
    fd = os.open(path, CREATE_FLAGS, MODE)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if fsync:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    os.close(fd)


def write_private_atomic(path: PathLike, data: bytes, *, tmp: PathLike | None = None, fsync: bool = False) -> None:
    """``data`` into ``path`` (0600) through the new temporary sibling ``tmp`` (default ``path`` + ``.tmp``), then an
    atomic rename; the sibling is removed when anything fails."""
    tmp_path = Path(tmp) if tmp is not None else Path(f"{os.fspath(path)}.tmp")
    create_private(tmp_path, data, fsync=fsync)
    try:
        os.replace(tmp_path, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_path)
        raise


__all__ = ["CREATE_FLAGS", "MODE", "NOT_PRIVATE_BITS", "READ_FLAGS", "NotPrivate", "TooLarge", "create_private",
           "open_private", "read_private", "write_private_atomic"]
