"""Board files: their names (``PID.json``), and reading one safely (no symlink at either level, ours, bounded)."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from dflash_contract import proc
from dflash_contract.board.dirs import BoardDirError, unsafe_dir_reason
from dflash_contract.board.schema import MAX_BOARD_BYTES
from dflash_contract.board.validate import BoardFormatError


def board_file_name(pid: int) -> str:
    return f"{pid}.json"


def pid_of_board_name(name: str) -> int | None:
    """The PID a board file is named after (``1234.json``), or None for any other name."""
    stem = name[: -len(".json")] if name.endswith(".json") else None
    if stem is None or not (stem.isascii() and stem.isdigit() and len(stem) < 12):
        return None
    pid = int(stem)
    return pid if proc.is_valid_pid(pid) else None


def read_board_bytes(directory: Path, name: str, owner_uid: int | None = None) -> bytes:
    """The bytes of ``directory/name``, opened without following symlinks at either level (directory fd +
    O_NOFOLLOW), checked to be a regular file of ``owner_uid`` (default: ours) and at most 4 MiB.

    BoardDirError for the directory, FileNotFoundError when there is no such file, BoardFormatError for a
    file that must not be read."""
    expected = os.getuid() if owner_uid is None else owner_uid
    try:
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise BoardDirError(f"board directory {directory} is a symlink or not a directory: refusing it") from None
        raise BoardDirError(f"cannot read board directory {directory}: {exc.strerror}") from None
    try:
        problem = unsafe_dir_reason(os.fstat(dir_fd), expected)
        if problem is not None:
            raise BoardDirError(f"board directory {directory} {problem[0]} ({problem[1]})")
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise BoardFormatError("is a symlink: refusing it") from None
            if exc.errno == errno.ENOENT:
                raise
            raise BoardFormatError(f"cannot be opened: {exc.strerror}") from None
    finally:
        os.close(dir_fd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise BoardFormatError("is not a regular file: refusing it")
        if st.st_uid != expected:
            raise BoardFormatError(f"belongs to uid {st.st_uid}, not to uid {expected}: refusing it")
        if st.st_size > MAX_BOARD_BYTES:
            raise BoardFormatError(f"is {st.st_size} bytes, over the {MAX_BOARD_BYTES}-byte limit: refusing it")
        chunks: list[bytes] = []
        total = 0
        while chunk := os.read(fd, 1 << 16):
            total += len(chunk)
            if total > MAX_BOARD_BYTES:
                raise BoardFormatError(f"grew over the {MAX_BOARD_BYTES}-byte limit: refusing it")
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def iter_board_names(directory: Path) -> Iterator[tuple[str, int]]:
    """(file name, PID) of every board file in ``directory`` (names only; nothing is opened)."""
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return
    for name in names:
        pid = pid_of_board_name(name)
        if pid is not None:
            yield name, pid
