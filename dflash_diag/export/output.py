"""Writing one output file (a trace, a profile) by the same rules as a snapshot bundle (docs/security.md).

Two steps, so that a bad ``-o`` fails before seconds of sampling: :func:`prepare_file` checks the
destination and reserves a private temporary sibling (0600, which proves the directory is writable);
:meth:`PreparedFile.commit` writes, fsyncs and moves it into place atomically.

- ``/``, the home directory, the working directory and their ancestors are never outputs (exit 9).
- An existing path is refused without ``force`` (exit 7). With ``force`` it is replaced only when it is a
  regular file of ours: owned by this user and recognisably written by dflash-diag (the caller's ``is_ours``
  reads its content: the trace's ``otherData.generator``, the profile's ``exporter``); anything else,
  a symlink included, is refused (exit 9) and left untouched.
- Without ``force`` the file is put in place with ``link()``, which never replaces: something that
  appeared there while we sampled is not overwritten.
- Any failure is one line (exit 11 for an unwritable place, a full disk, a name too long); the temporary
  file is removed; nothing half-written is left.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from dflash_diag.errors import CommandError, ExitCode

# One definition, shared with bundles, of the places no output may ever be (/, home, the working directory), of
# the one-line error for a place that cannot be written, and of how a path is shown in it.
from dflash_diag.snapshot.bundle import cannot_write, protected_reason, shown_path

TMP_PREFIX = ".dflash-diag-tmp-"
MAX_OURS_BYTES = 512 * 1024 * 1024  # an existing output larger than this is not read to check it is ours


def _unsafe(message: str) -> CommandError:
    return CommandError(message, ExitCode.UNSAFE_OUTPUT)


def _read_regular(path: Path, limit: int) -> bytes | None:
    """The content of a regular file of ours (never through a symlink), or None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_size > limit:
            return None
        return fh.read(limit + 1)


def _not_ours(path: Path, is_ours: Callable[[bytes], bool], what: str) -> str | None:
    if os.path.islink(path):
        return "is a symlink"
    try:
        st = os.lstat(path)
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if st.st_uid != os.getuid():
        return f"belongs to uid {st.st_uid}, not to you"
    data = _read_regular(path, MAX_OURS_BYTES)
    if data is None or not is_ours(data):
        return f"is not a {what} dflash-diag wrote"
    return None


class PreparedFile:
    """A checked destination with its temporary sibling reserved; :meth:`commit` or :meth:`abandon` it."""

    def __init__(self, path: Path, *, replace: bool, tmp: Path, fd: int, is_ours: Callable[[bytes], bool],
                 what: str) -> None:
        self.path = path
        self.replace = replace
        self._tmp: Path | None = tmp
        self._fd: int | None = fd
        self._is_ours = is_ours
        self._what = what

    def commit(self, data: bytes) -> Path:
        if self._tmp is None or self._fd is None:
            raise RuntimeError("this output was already committed or abandoned")
        fd, self._fd = self._fd, None
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            self._place()
        except OSError as exc:
            self.abandon()
            raise cannot_write(self.path, exc) from None
        except BaseException:
            self.abandon()
            raise
        self._tmp = None
        return self.path

    def _place(self) -> None:
        assert self._tmp is not None
        if self.replace and os.path.lexists(self.path):
            reason = _not_ours(self.path, self._is_ours, self._what)
            if reason is not None:  # changed while we sampled
                raise _unsafe(f"{shown_path(self.path)} {reason}: --force replaces only a {self._what} dflash-diag wrote")
            os.replace(self._tmp, self.path)
            return
        try:
            os.link(self._tmp, self.path)  # never replaces what appeared there meanwhile
        except FileExistsError:
            raise _exists(self.path, self._what) from None
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK, errno.EXDEV):
                raise
            if os.path.lexists(self.path):
                raise _exists(self.path, self._what) from None
            os.rename(self._tmp, self.path)
            return
        _unlink_quietly(self._tmp)

    def abandon(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        tmp, self._tmp = self._tmp, None
        if tmp is not None:
            _unlink_quietly(tmp)


def _exists(path: Path, what: str) -> CommandError:
    return CommandError(f"{shown_path(path)} exists: pass --force to replace a {what} dflash-diag wrote there, "
                        "or -o another path", ExitCode.EXISTS)


def _unlink_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def prepare_file(path: Path, *, force: bool, is_ours: Callable[[bytes], bool], what: str) -> PreparedFile:
    """Check where ``what`` goes and reserve its temporary sibling, before any sampling (module docstring)."""
    text = str(path)
    if not text or "\0" in text:
        raise CommandError("the output path is empty or holds a NUL character", ExitCode.USAGE)
    reason = protected_reason(path)
    if reason is not None:
        raise _unsafe(f"{shown_path(path)} {reason}: dflash-diag never writes a {what} there; pick a file name with -o")
    parent = path.parent
    try:
        if not stat.S_ISDIR(os.stat(parent).st_mode):
            raise CommandError(f"{shown_path(parent)} is not a directory: pick another -o", ExitCode.CANNOT_WRITE)
    except OSError as exc:
        raise cannot_write(parent, exc) from None
    try:
        name_max = int(os.pathconf(parent, "PC_NAME_MAX"))
    except (OSError, ValueError):
        name_max = 255
    if len(os.fsencode(path.name)) > name_max:
        raise CommandError(f"{shown_path(path.name)[:40]}...: the name is longer than the {name_max} bytes this file "
                           "system allows: pick a shorter -o", ExitCode.CANNOT_WRITE)
    replace = os.path.lexists(path)
    if replace:
        if not force:
            raise _exists(path, what)
        why = _not_ours(path, is_ours, what)
        if why is not None:
            raise _unsafe(f"{shown_path(path)} {why}: --force replaces only a {what} dflash-diag wrote; "
                          "move it away or pick another -o")
    try:
        fd, tmp = tempfile.mkstemp(prefix=TMP_PREFIX, suffix=".tmp", dir=parent)
    except OSError as exc:
        raise cannot_write(path, exc) from None
    os.fchmod(fd, 0o600)
    return PreparedFile(path, replace=replace, tmp=Path(tmp), fd=fd, is_ours=is_ours, what=what)
