"""Every output dflash-diag writes (a bundle, a trace, a profile, a screenshot) is put in place by the rules
here, so that it never destroys what dflash-diag did not write and never leaves a half-written file
(docs/security.md).

Two steps, so that a bad destination fails before seconds of sampling are spent:

- :func:`check_destination` refuses ``/``, the home directory, the working directory and what holds them
  (exit 9), a missing or non-directory parent, a name longer than the file system allows (exit 11), and an
  existing path (exit 7) unless ``force`` and the caller recognises it as its own (else exit 9);
  :func:`reserve_sibling` then creates the private temporary sibling (0600 file / 0700 directory), which
  proves the directory is writable.
- The caller writes into the sibling and :func:`place_file` moves it into place: ``link()`` (never
  replaces: something that appeared there meanwhile is not overwritten), or with ``force`` an atomic
  ``rename()`` over an output still recognised as ours. :class:`PreparedFile` does both for one file.

Temporary siblings carry their writer in their name, ``.dflash-diag-tmp-PID-TICKS-XXXXXXXX.tmp`` (PID and its
start time in clock ticks, ``dflash_contract.proc``), and so do the old bundles moved aside while one is
replaced (``.dflash-diag-old-PID-TICKS-XXXXXXXX``): whatever a killed command left behind is removed by the
next command that writes an output in that directory, once the writer no longer runs
(:func:`remove_stale_siblings`). Only entries named exactly so, of this user; a sibling directory only when
it holds nothing but regular files of this user (they are unlinked, then the directory removed with ``rmdir``).

Any failure is one line; the temporary sibling is removed.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from dflash_contract import proc
from dflash_diag.errors import CommandError, ExitCode

# Our own short sibling names (a long -o name must not make the temporary name too long).
TMP_PREFIX = ".dflash-diag-tmp-"
OLD_PREFIX = ".dflash-diag-old-"
_SIBLING = re.compile(r"^\.dflash-diag-(?:tmp|old)-(\d{1,7})-(\d{1,20})-[a-z0-9_]{6,16}(?:\.tmp)?$")
MAX_OURS_BYTES = 512 * 1024 * 1024  # an existing output larger than this is not read to check it is ours


def cannot_write(path: Path | str, exc: OSError, flag: str = "-o") -> CommandError:
    """The one-line error (exit 11) for an output that cannot be written, naming what to do about it."""
    why = {
        errno.ENOSPC: f"no space left on the device: free some space or pick another {flag}",
        errno.EDQUOT: f"disk quota exceeded: free some space or pick another {flag}",
        errno.EROFS: f"read-only file system: pick another {flag}",
        errno.EACCES: "permission denied: pick a directory you can write to",
        errno.EPERM: "not permitted: pick a directory you can write to",
        errno.ENAMETOOLONG: f"name too long: pick a shorter {flag}",
        errno.ENOENT: f"no such directory: create it or pick another {flag}",
        errno.ENOTDIR: f"a part of the path is not a directory: pick another {flag}",
    }.get(exc.errno or 0, f"{exc.strerror or exc.__class__.__name__}: pick another {flag}")
    return CommandError(f"cannot write {shown_path(path)[:200]}: {why}", ExitCode.CANNOT_WRITE)


def shown_path(path: Path | str) -> str:
    """A path as one printable line (a non-UTF-8 or control-character name must not garble the terminal)."""
    text = os.fsdecode(path) if isinstance(path, bytes) else str(path)
    return "".join(ch if ch.isprintable() and not 0xDC80 <= ord(ch) <= 0xDCFF else repr(ch)[1:-1] for ch in text)


def _guarded_dirs() -> list[tuple[str, str]]:
    """Directories no output may be or contain: the root, the home directory, the working directory."""
    guarded = [("/", "the root directory")]
    homes = {os.path.expanduser("~")}
    try:
        import pwd  # POSIX only

        homes.add(pwd.getpwuid(os.getuid()).pw_dir)
    except (ImportError, KeyError):
        pass
    guarded += [(os.path.realpath(h), "your home directory") for h in homes if h and h != "~"]
    try:
        guarded.append((os.path.realpath(os.getcwd()), "the working directory"))
    except OSError:
        pass
    return guarded


def protected_reason(path: Path) -> str | None:
    """Why ``path`` may never be an output (it is /, home or the working directory, or holds one), else None."""
    try:
        real = os.path.realpath(path)
    except OSError:  # a path too long to resolve: it is none of these (writing it fails with exit 11)
        return None
    for guarded, label in _guarded_dirs():
        if real == guarded:
            return f"is {label}"
        if guarded == "/":
            continue
        if guarded.startswith(real.rstrip("/") + "/"):
            return f"holds {label}"
    return None


def _name_max(directory: Path) -> int:
    try:
        return int(os.pathconf(directory, "PC_NAME_MAX"))
    except (OSError, ValueError):
        return 255


def unsafe(message: str) -> CommandError:
    return CommandError(message, ExitCode.UNSAFE_OUTPUT)


def exists_error(path: Path, what: str, flag: str = "-o", *, forceable: bool = True) -> CommandError:
    fix = (f"pass --force to replace a {what} dflash-diag wrote there, or {flag} another path" if forceable
           else f"choose another {flag} path")
    return CommandError(f"{shown_path(path)} exists: {fix}", ExitCode.EXISTS)


def check_destination(path: Path, *, force: bool, what: str, why_not_ours: Callable[[Path], str | None],
                      flag: str = "-o", forceable: bool = True) -> bool:
    """Refuse every destination that must not or cannot be written (module docstring); True when ``path``
    exists and is to be replaced (``force`` and ``why_not_ours`` found nothing)."""
    text = str(path)
    if not text or "\0" in text:
        raise CommandError(f"{flag}: the output path is empty or holds a NUL character", ExitCode.USAGE)
    reason = protected_reason(path)
    if reason is not None:
        raise unsafe(f"{shown_path(path)} {reason}: dflash-diag never writes a {what} there; pick a new name with {flag}")
    parent = path.parent
    try:
        if not stat.S_ISDIR(os.stat(parent).st_mode):
            raise CommandError(f"{shown_path(parent)[:200]} is not a directory: pick another {flag}",
                               ExitCode.CANNOT_WRITE)
    except OSError as exc:
        raise cannot_write(parent, exc, flag) from None
    name_max = _name_max(parent)
    if len(os.fsencode(path.name)) > name_max:
        raise CommandError(f"{shown_path(path.name)[:40]}...: the name is longer than the {name_max} bytes this file "
                           f"system allows: pick a shorter {flag}", ExitCode.CANNOT_WRITE)
    if not os.path.lexists(path):
        return False
    if not force:
        raise exists_error(path, what, flag, forceable=forceable)
    if os.path.islink(path):
        raise unsafe(f"{shown_path(path)} is a symlink: --force replaces only a {what} dflash-diag wrote; "
                     f"remove the link or pick another {flag}")
    why = why_not_ours(path)
    if why is not None:
        raise unsafe(f"{shown_path(path)} {why}: --force replaces only a {what} dflash-diag wrote; "
                     f"move it away or pick another {flag}")
    return True


# --- temporary siblings, named after their writer -------------------------------------------------------------


def _writer_tag() -> str:
    """``PID-TICKS-``: who writes this sibling, so that a later run can tell when it was left by a dead one."""
    return f"{os.getpid()}-{proc.start_time_ticks() or 0}-"


def reserve_sibling(path: Path, *, as_dir: bool, flag: str = "-o") -> tuple[Path, int | None]:
    """Create the private temporary sibling of ``path`` (a 0600 file, open, or a 0700 directory) after removing
    the ones dead writers left in that directory; a one-line exit-11 error when nothing can be created there."""
    parent = path.parent
    remove_stale_siblings(parent)
    prefix = f"{TMP_PREFIX}{_writer_tag()}"
    try:
        if as_dir:
            return Path(tempfile.mkdtemp(prefix=prefix, suffix=".tmp", dir=parent)), None
        fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=parent)
    except OSError as exc:
        if exc.errno == errno.ENOENT:  # the directory exists, yet nothing can be created in it (/proc)
            raise CommandError(f"cannot write {shown_path(path)[:200]}: files cannot be created in "
                               f"{shown_path(parent)[:200]}: pick another {flag}", ExitCode.CANNOT_WRITE) from None
        raise cannot_write(path, exc, flag) from None
    os.fchmod(fd, 0o600)
    return Path(tmp), fd


def aside_name(directory: Path) -> Path:
    """Where an old bundle of ours is moved while its replacement is renamed into place."""
    return directory / f"{OLD_PREFIX}{_writer_tag()}{os.urandom(4).hex()}"


def remove_stale_siblings(directory: Path) -> list[str]:
    """Remove the temporary siblings (and moved-aside old bundles) whose writer no longer runs; their names.

    Only names matching ours exactly, only entries of this user, never through a symlink; a directory only
    when it holds nothing but regular files of this user (unlinked, then ``rmdir``). A sibling of a live
    writer (this process included) is never touched."""
    removed: list[str] = []
    try:
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return removed
    try:
        for name in os.listdir(dir_fd):
            match = _SIBLING.match(name)
            # Ticks 0: the writer could not read its own start time; only "no such PID" proves it gone then.
            if match is None or proc.process_alive(int(match[1]), int(match[2]) or None):
                continue
            if _remove_sibling(dir_fd, name):
                removed.append(name)
    except OSError:
        pass
    finally:
        os.close(dir_fd)
    return removed


def _remove_sibling(dir_fd: int, name: str) -> bool:
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if st.st_uid != os.getuid():
            return False
        if stat.S_ISREG(st.st_mode):
            os.unlink(name, dir_fd=dir_fd)
            return True
        if not stat.S_ISDIR(st.st_mode):
            return False
        inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        try:
            entries = os.listdir(inner)
            for entry in entries:  # anything but our own regular files: not what we left, leave it all
                est = os.stat(entry, dir_fd=inner, follow_symlinks=False)
                if not stat.S_ISREG(est.st_mode) or est.st_uid != os.getuid():
                    return False
            for entry in entries:
                os.unlink(entry, dir_fd=inner)
        finally:
            os.close(inner)
        os.rmdir(name, dir_fd=dir_fd)
        return True
    except OSError:
        return False


def unlink_quietly(path: Path | str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def place_file(tmp: Path, path: Path, *, replace: bool, what: str, why_not_ours: Callable[[Path], str | None],
               flag: str = "-o", forceable: bool = True) -> None:
    """Move the written ``tmp`` to ``path``: over our own old output only when ``replace`` (checked again: it
    may have changed while we sampled), else by ``link()``, which never replaces what appeared meanwhile."""
    if replace and os.path.lexists(path):
        reason = why_not_ours(path)
        if reason is not None:
            raise unsafe(f"{shown_path(path)} {reason}: --force replaces only a {what} dflash-diag wrote")
        os.replace(tmp, path)  # atomic over our own old output
        return
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise exists_error(path, what, flag, forceable=forceable) from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK, errno.EXDEV):
            raise
        if os.path.lexists(path):  # a file system without hard links
            raise exists_error(path, what, flag, forceable=forceable) from None
        os.rename(tmp, path)
        return
    unlink_quietly(tmp)


# --- one file ---------------------------------------------------------------------------------------------------


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


def _file_not_ours(is_ours: Callable[[bytes], bool], what: str) -> Callable[[Path], str | None]:
    """Why an existing path is not a regular file of ours whose content ``is_ours`` recognises, or None."""

    def why(path: Path) -> str | None:
        try:
            st = os.lstat(path)
        except OSError as exc:
            return f"cannot be read ({exc.strerror})"
        if stat.S_ISLNK(st.st_mode):
            return "is a symlink"
        if not stat.S_ISREG(st.st_mode):
            return "is not a regular file"
        if st.st_uid != os.getuid():
            return f"belongs to uid {st.st_uid}, not to you"
        data = _read_regular(path, MAX_OURS_BYTES)
        if data is None or not is_ours(data):
            return f"is not a {what} dflash-diag wrote"
        return None

    return why


class ReservedOutput:
    """A checked destination with its temporary sibling reserved: commit it once, or abandon it. The one
    commit-or-nothing discipline of every output (a file here, a bundle in ``bundle.py``): any failure removes the
    sibling and leaves nothing half-written (exit 11 for an OSError)."""

    def __init__(self, path: Path, *, replace: bool, tmp: Path, fd: int | None, flag: str = "-o") -> None:
        self.path = path
        self.replace = replace  # an existing output of ours is to be replaced
        self._tmp: Path | None = tmp
        self._fd = fd
        self._flag = flag

    def _commit(self, write_and_place: Callable[[Path], None]) -> Path:
        """Run ``write_and_place(tmp)``; on any failure abandon the sibling, an OSError as one line (exit 11)."""
        if self._tmp is None:
            raise RuntimeError("this output was already committed or abandoned")
        try:
            write_and_place(self._tmp)
        except OSError as exc:
            self.abandon()
            raise cannot_write(self.path, exc, self._flag) from None
        except BaseException:
            self.abandon()
            raise
        self._tmp = None
        return self.path

    def _take_fd(self) -> int:
        """The reserved file's descriptor, handed over once (whoever takes it closes it)."""
        fd, self._fd = self._fd, None
        if fd is None:
            raise RuntimeError("this output was already committed or abandoned")
        return fd

    def abandon(self) -> None:
        """Remove the temporary sibling (a no-op once committed)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        tmp, self._tmp = self._tmp, None
        if tmp is not None:
            self._remove_tmp(tmp)

    def _remove_tmp(self, tmp: Path) -> None:
        unlink_quietly(tmp)


class PreparedFile(ReservedOutput):
    """One file's destination, checked, with its temporary sibling reserved; :meth:`commit` or :meth:`abandon` it."""

    def __init__(self, path: Path, *, replace: bool, tmp: Path, fd: int, why_not_ours: Callable[[Path], str | None],
                 what: str, flag: str, forceable: bool) -> None:
        super().__init__(path, replace=replace, tmp=tmp, fd=fd, flag=flag)
        self._why_not_ours = why_not_ours
        self._what = what
        self._forceable = forceable

    def commit(self, data: bytes) -> Path:
        """Write ``data``, fsync, move into place; on any failure nothing is left (exit 11 for an OSError)."""
        if self._fd is None:
            raise RuntimeError("this output was already committed or abandoned")
        return self._commit(lambda tmp: self._write_and_place(tmp, data))

    def _write_and_place(self, tmp: Path, data: bytes) -> None:
        with os.fdopen(self._take_fd(), "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        place_file(tmp, self.path, replace=self.replace, what=self._what, why_not_ours=self._why_not_ours,
                   flag=self._flag, forceable=self._forceable)


def never_ours(data: bytes) -> bool:
    """For outputs that are never replaced (screenshots): no existing file is recognised as ours."""
    return False


def prepare_file(path: Path, *, force: bool, is_ours: Callable[[bytes], bool], what: str, flag: str = "-o",
                 forceable: bool = True) -> PreparedFile:
    """Check where ``what`` goes and reserve its temporary sibling, before any sampling (module docstring).

    ``forceable=False``: the command has no ``--force`` (an existing path is always refused, exit 7)."""
    why_not_ours = _file_not_ours(is_ours, what)
    replace = check_destination(path, force=force and forceable, what=what, why_not_ours=why_not_ours, flag=flag,
                                forceable=forceable)
    tmp, fd = reserve_sibling(path, as_dir=False, flag=flag)
    assert fd is not None
    return PreparedFile(path, replace=replace, tmp=tmp, fd=fd, why_not_ours=why_not_ours, what=what, flag=flag,
                        forceable=forceable)
