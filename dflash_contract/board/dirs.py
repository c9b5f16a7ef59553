"""Where boards live: for a user or for a given process, what makes a directory safe (ours or the target's
owner, 0700, not a symlink), and the private fallback when the default one is not."""

from __future__ import annotations

import os
import re
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from dflash_contract import proc

BOARD_DIR_ENV: Final = "DFLASH_DIAG_BOARD_DIR"


class BoardDirError(OSError):
    """The board directory is unsafe (symlink, foreign owner, group/world access) or cannot be made."""


def unsafe_dir_reason(st: os.stat_result, owner_uid: int | None = None) -> tuple[str, str] | None:
    """Why a board directory must not be used, as (what is wrong, what to do), or None when it is safe.

    ``owner_uid`` (default: ours) is who must own it: root reading another user's board passes that user's uid.
    """
    expected = os.getuid() if owner_uid is None else owner_uid
    if stat.S_ISLNK(st.st_mode):
        return "is a symlink: refusing it", "remove it; the probes recreate it"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory", "remove it or pick another --board-dir"
    if st.st_uid != expected:
        who = "you" if owner_uid is None or expected == os.getuid() else f"uid {expected}"
        return (f"belongs to uid {st.st_uid}, not to {who} (another user may have created it to hide or switch "
                "off the probes): refusing it", "remove it, or use a directory of your own with --board-dir")
    if st.st_mode & 0o077:
        return f"is open to other users (mode {st.st_mode & 0o777:o})", "chmod 700 it"
    return None


def _runtime_dir(uid: int, environ: Mapping[str, str]) -> Path | None:
    """The user's runtime directory ($XDG_RUNTIME_DIR, else /run/user/UID) when it is really theirs."""
    for candidate in (environ.get("XDG_RUNTIME_DIR"), f"/run/user/{uid}"):
        if not candidate:
            continue
        try:
            st = os.stat(candidate)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode) and st.st_uid == uid and not st.st_mode & 0o022:
            return Path(candidate)
    return None


def tmp_board_dir(uid: int) -> Path:
    return Path("/tmp") / f"dflash-diag-{uid}"  # literal /tmp: writer and reader must agree whatever TMPDIR says


def default_board_dir(environ: Mapping[str, str] | None = None, uid: int | None = None) -> Path:
    """``$DFLASH_DIAG_BOARD_DIR``, else ``<runtime dir>/dflash-diag`` (XDG_RUNTIME_DIR or /run/user/UID,
    when it is the user's), else ``/tmp/dflash-diag-UID``. ``environ``/``uid`` default to ours."""
    env = os.environ if environ is None else environ
    user = os.getuid() if uid is None else uid
    override = env.get(BOARD_DIR_ENV)
    if override:
        return Path(override)
    runtime = _runtime_dir(user, env)
    return runtime / "dflash-diag" if runtime is not None else tmp_board_dir(user)


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` 0700 if missing; BoardDirError for a symlink, a foreign owner or group/world access."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise BoardDirError(f"cannot create board directory {path}: {exc.strerror}") from exc
    problem = unsafe_dir_reason(os.lstat(path))
    if problem is not None:
        raise BoardDirError(f"board directory {path} {problem[0]}; {problem[1]}")
    return path


def choose_board_dir(explicit: str | os.PathLike[str] | None = None) -> tuple[Path, str | None]:
    """The directory to publish into, created and checked, and a warning when the default was unusable.

    An explicit directory (``--board-dir``, ``$DFLASH_DIAG_BOARD_DIR``) must be safe: BoardDirError otherwise.
    The default one, when someone else owns or opened it (another local user can pre-create
    ``/tmp/dflash-diag-UID``), is replaced by a fresh private ``dflash-diag-UID-XXXXXX`` beside it, which
    readers find too (:func:`candidate_dirs`); the warning says so, to be printed loudly.
    """
    if explicit is not None and str(explicit):
        return ensure_private_dir(Path(explicit)), None
    env_dir = os.environ.get(BOARD_DIR_ENV)
    if env_dir:
        return ensure_private_dir(Path(env_dir)), None
    preferred = default_board_dir()
    try:
        return ensure_private_dir(preferred), None
    except BoardDirError as exc:
        fallback = _private_fallback()
        if fallback is None:
            try:  # mkdtemp: 0700, ours, a name nobody could predict and pre-create
                fallback = Path(tempfile.mkdtemp(prefix=f"dflash-diag-{os.getuid()}-",
                                                 dir=tmp_board_dir(os.getuid()).parent))
            except OSError as mk:
                raise BoardDirError(f"{exc}; and no private fallback could be made: {mk.strerror}") from mk
        return fallback, f"{exc}; publishing to {fallback} instead (readers find it)"


def _private_fallback() -> Path | None:
    """A fallback made earlier (``dflash-diag-UID-XXXXXX`` beside the default), still ours and private: reused, so
    that every `attach` and `run` of a user whose default is taken does not leave one more directory behind."""
    uid = os.getuid()
    parent = tmp_board_dir(uid).parent
    try:
        names = sorted(p.name for p in parent.iterdir() if re.fullmatch(rf"dflash-diag-{uid}-\w+", p.name))
    except OSError:
        return None
    for name in names:
        path = parent / name
        try:
            if unsafe_dir_reason(os.lstat(path)) is None:
                return path
        except OSError:
            continue
    return None


def _environ_of(pid: int) -> dict[str, str] | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            raw = fh.read(1 << 20)
    except OSError:
        return None
    out: dict[str, str] = {}
    for item in raw.split(b"\0"):
        name, eq, value = item.partition(b"=")
        if eq:
            out[name.decode("utf-8", "surrogateescape")] = value.decode("utf-8", "surrogateescape")
    return out


def candidate_dirs(pid: int | None = None) -> list[tuple[Path, int]]:
    """Where the board of ``pid`` (or, without one, our boards) may be, most likely first, each with the
    uid that must own it: the directory the process's own environment names, our own
    ``$DFLASH_DIAG_BOARD_DIR``, the owner's runtime directory, ``/tmp/dflash-diag-UID`` and the private
    fallbacks ``/tmp/dflash-diag-UID-*`` (:func:`choose_board_dir`).
    """
    uid = os.getuid() if pid is None else proc.owner_uid(pid)
    if uid is None:
        uid = os.getuid()
    out: list[tuple[Path, int]] = []
    env = _environ_of(pid) if pid is not None else dict(os.environ)
    if env is not None:
        out.append((default_board_dir(env, uid), uid))
    ours = os.environ.get(BOARD_DIR_ENV)
    if ours:  # where we were told boards are (`attach` publishes there, into a process that never knew)
        out.append((Path(ours), uid))
    runtime = _runtime_dir(uid, {})
    if runtime is not None:
        out.append((runtime / "dflash-diag", uid))
    tmp = tmp_board_dir(uid)
    out.append((tmp, uid))
    try:
        fallbacks = sorted(p for p in tmp.parent.iterdir() if re.fullmatch(rf"dflash-diag-{uid}-\w+", p.name))
    except OSError:
        fallbacks = []
    out.extend((p, uid) for p in fallbacks)
    seen: set[Path] = set()
    unique = []
    for path, owner in out:
        if path not in seen:
            seen.add(path)
            unique.append((path, owner))
    return unique
