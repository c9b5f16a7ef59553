"""Writing a bundle without ever destroying what dflash-diag did not write, and reading one back safely.

Write, in two steps so that a bad ``-o`` fails before seconds of sampling are spent, by the rules every output
follows (:mod:`dflash_diag.snapshot.output`):

- :func:`prepare_output` checks the destination and reserves a temporary sibling (0600 file / 0700
  directory, a short name of our own that names its writer) in the target directory, which proves the
  directory is writable. ``/``, the home directory, the working directory and their ancestors are always
  refused. An existing output is refused unless ``force``; with ``force`` it is replaced only when it is a
  bundle this tool wrote: its ``MANIFEST.json`` names every file and each file still has the SHA-256
  written there.
- :meth:`PreparedOutput.commit` writes the files into the temporary sibling and renames it into place.
  A replaced bundle directory is moved aside first and then emptied file by file (only the names its
  manifest lists) and removed with ``rmdir``: never a recursive delete.

Any failure is a one-line :class:`CommandError` (exit codes in docs/security.md); the temporary sibling is
removed, nothing half-written is left.

Read: bundles come from other people: tar members are validated (regular files only, no absolute paths or
``..``, bounded sizes and counts) and only the one member asked for is read, into memory, never extracted:
``snapshot.json`` (``diff``; its decoding is bounded and its shape checked before use,
:mod:`dflash_diag.snapshot.shape`) or ``observation.json`` (``doctor BUNDLE``; bounded and checked field by field,
:mod:`dflash_diag.observe.codec`).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import tarfile
import time
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from dflash_contract.private_file import create_private
from dflash_diag import __version__
from dflash_diag.errors import CommandError, ExitCode
from dflash_diag.model import Observation
from dflash_diag.model.job import JobObservation

# One set of rules for every output: where none may go, the errno table, the temporary siblings.
from dflash_diag.snapshot.output import (
    ReservedOutput,
    aside_name,
    check_destination,
    exists_error,
    place_file,
    reserve_sibling,
    shown_path,
    unlink_quietly,
    unsafe,
)

SCHEMA_PREFIX = "dflash-diag.snapshot/"
# What diff reads: 1 differs from 2 only in the shape of a finding's evidence, which diff does not compare.
SUPPORTED_SCHEMAS = ("dflash-diag.snapshot/1", "dflash-diag.snapshot/2")
MAX_MEMBERS = 64
MAX_MEMBER_BYTES = 64 * 1024 * 1024
MAX_TOTAL_BYTES = 256 * 1024 * 1024

# What makes a bundle recognisably ours: this file, listing every other file with its SHA-256.
MANIFEST_NAME = "MANIFEST.json"
OBSERVATION_NAME = "observation.json"  # the window the bundle's analysis judged (observe.codec): doctor replays it
MANIFEST_SCHEMA = "dflash-diag.bundle-manifest/1"


def default_name(pid: int, now_wall_s: float) -> str:
    return f"dflash-diag-snapshot-{pid}-{time.strftime('%Y%m%d-%H%M%S', time.localtime(now_wall_s))}"


# --- recognising our own bundle ----------------------------------------------------------------------------


def _plain_name(name: object) -> bool:
    return isinstance(name, str) and name not in ("", ".", "..") and "/" not in name and "\0" not in name


def manifest_bytes(files: Mapping[str, bytes]) -> bytes:
    """The MANIFEST.json of a bundle holding ``files``: every name with its size and SHA-256."""
    listed = {name: {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()} for name, data in sorted(files.items())}
    doc = {"schema": MANIFEST_SCHEMA, "tool": "dflash-diag", "version": __version__, "files": listed}
    return (json.dumps(doc, indent=1) + "\n").encode()


def _listed_files(data: bytes | None) -> dict[str, str] | None:
    """name -> SHA-256 from a manifest, or None when it is not a dflash-diag manifest."""
    if data is None:
        return None
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(doc, dict) or doc.get("schema") != MANIFEST_SCHEMA or not isinstance(doc.get("files"), dict):
        return None
    listed: dict[str, str] = {}
    for name, entry in doc["files"].items():
        if not _plain_name(name) or name == MANIFEST_NAME or not isinstance(entry, dict):
            return None
        digest = entry.get("sha256")
        if not isinstance(digest, str):
            return None
        listed[name] = digest
    return listed or None


def _sha256_of_stream(fh: IO[bytes], limit: int = MAX_TOTAL_BYTES) -> str | None:
    h = hashlib.sha256()
    total = 0
    while chunk := fh.read(1 << 20):
        total += len(chunk)
        if total > limit:
            return None
        h.update(chunk)
    return h.hexdigest()


def _open_regular(path: Path) -> IO[bytes] | None:
    """``path`` opened for reading when it is a regular file (never through a symlink), else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return os.fdopen(fd, "rb")


def _file_sha256(path: Path) -> str | None:
    fh = _open_regular(path)
    if fh is None:
        return None
    with fh:
        return _sha256_of_stream(fh)


def _file_bytes(path: Path, limit: int = 1 << 20) -> bytes | None:
    fh = _open_regular(path)
    if fh is None:
        return None
    with fh:
        data = fh.read(limit + 1)
    return data if len(data) <= limit else None


def _dir_not_ours(path: Path) -> tuple[str | None, dict[str, str]]:
    """(why the directory is not an intact bundle of ours or None, the names its manifest lists)."""
    try:
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode):
            return "is not a directory", {}
        names = set(os.listdir(path))
    except OSError as exc:
        return f"cannot be read ({exc.strerror})", {}
    if MANIFEST_NAME not in names:
        return f"has no {MANIFEST_NAME}: it is not a bundle dflash-diag wrote", {}
    listed = _listed_files(_file_bytes(path / MANIFEST_NAME))
    if listed is None:
        return f"has a {MANIFEST_NAME} that is not dflash-diag's", {}
    extra = sorted(names - set(listed) - {MANIFEST_NAME})
    if extra:
        return f"holds {shown_path(extra[0])!r}, which dflash-diag did not write", listed
    for name in sorted(names & set(listed)):
        if _file_sha256(path / name) != listed[name]:
            return f"has {name} changed since dflash-diag wrote it", listed
    return None, listed


def _tar_not_ours(path: Path) -> str | None:
    """Why the file is not an intact .tar.gz bundle of ours, or None."""
    try:
        mode = os.lstat(path).st_mode
        if stat.S_ISDIR(mode):
            return "is a directory, not a .tar.gz bundle file"
        if not stat.S_ISREG(mode):
            return "is not a regular file"
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    fh = _open_regular(path)
    if fh is None:
        return "cannot be read"
    try:
        with fh, tarfile.open(fileobj=fh, mode="r:gz") as tar:
            members = _bounded_members(tar)
            if members is None:
                return "is not a bundle dflash-diag wrote (unexpected archive members)"
            by_name = {m.name.split("/", 1)[1]: m for m in members}
            listed = _listed_files(_member_bytes(tar, by_name.get(MANIFEST_NAME)))
            if listed is None:
                return f"has no dflash-diag {MANIFEST_NAME}: it is not a bundle dflash-diag wrote"
            if set(by_name) != set(listed) | {MANIFEST_NAME}:
                return "holds files its manifest does not list: not a bundle as dflash-diag wrote it"
            for name, digest in listed.items():
                member = tar.extractfile(by_name[name])
                if member is None or _sha256_of_stream(member) != digest:
                    return f"has {name} changed since dflash-diag wrote it"
    except (tarfile.TarError, EOFError, OSError, zlib.error, ValueError):
        return "is not a .tar.gz bundle dflash-diag wrote"
    return None


def _bounded_members(tar: tarfile.TarFile) -> list[tarfile.TarInfo] | None:
    """The members of one of our archives (regular files ``top/name`` under one top directory), or None."""
    members: list[tarfile.TarInfo] = []
    tops: set[str] = set()
    for member in tar:
        parts = member.name.split("/")
        if len(members) >= MAX_MEMBERS or not member.isfile() or len(parts) != 2 or not all(map(_plain_name, parts)):
            return None
        tops.add(parts[0])
        members.append(member)
    return members if len(tops) == 1 else None


def _member_bytes(tar: tarfile.TarFile, member: tarfile.TarInfo | None, limit: int = 1 << 20) -> bytes | None:
    if member is None or member.size > limit:
        return None
    fh = tar.extractfile(member)
    return fh.read(limit + 1) if fh is not None else None


class PreparedOutput(ReservedOutput):
    """A bundle's destination, checked, with its temporary sibling reserved; :meth:`commit` or :meth:`abandon` it."""

    def __init__(self, path: Path, *, as_dir: bool, replace: bool, tmp: Path, fd: int | None) -> None:
        super().__init__(path, replace=replace, tmp=tmp, fd=fd)
        self.as_dir = as_dir
        self._written: list[str] = []

    def commit(self, files: Mapping[str, bytes], *, top: str, mtime_s: float) -> Path:
        """Write ``files`` (plus MANIFEST.json) and move them into place; a failure leaves nothing behind."""
        if self._tmp is None:
            raise RuntimeError("this output was already committed or abandoned")
        if not all(_plain_name(n) and n != MANIFEST_NAME for n in files):
            raise ValueError("bundle file names must be plain names other than MANIFEST.json")
        return self._commit(lambda tmp: self._write_and_place(files, top, mtime_s))

    def _write_and_place(self, files: Mapping[str, bytes], top: str, mtime_s: float) -> None:
        everything = {**files, MANIFEST_NAME: manifest_bytes(files)}
        if self.as_dir:
            self._write_dir(everything)
            self._place_dir()
        else:
            self._write_tar(everything, top, mtime_s)
            self._place_file()

    def _remove_tmp(self, tmp: Path) -> None:
        """Only the files we put in it: a directory is emptied name by name and removed with rmdir."""
        if self.as_dir:
            _remove_our_files(tmp, self._written)
        else:
            unlink_quietly(tmp)

    # -- writing --------------------------------------------------------------------------------------

    def _write_tar(self, files: Mapping[str, bytes], top: str, mtime_s: float) -> None:
        with os.fdopen(self._take_fd(), "wb") as raw, tarfile.open(fileobj=raw, mode="w:gz") as tar:
            for name, data in files.items():
                info = tarfile.TarInfo(f"{top}/{name}")
                info.size, info.mode, info.mtime = len(data), 0o600, int(mtime_s)
                tar.addfile(info, io.BytesIO(data))
            tar.close()
            raw.flush()
            os.fsync(raw.fileno())

    def _write_dir(self, files: Mapping[str, bytes]) -> None:
        assert self._tmp is not None
        for name, data in files.items():
            create_private(self._tmp / name, data, fsync=True)  # 0600, O_EXCL|O_NOFOLLOW, whole or removed
            self._written.append(name)

    # -- moving into place ----------------------------------------------------------------------------

    def _place_file(self) -> None:
        assert self._tmp is not None
        place_file(self._tmp, self.path, replace=self.replace, what="bundle", why_not_ours=_tar_not_ours)

    def _place_dir(self) -> None:
        assert self._tmp is not None
        if not self.replace:
            try:
                os.mkdir(self.path, 0o700)  # claim the name: fails if anything appeared there meanwhile
            except FileExistsError:
                raise exists_error(self.path, "bundle") from None
            os.rename(self._tmp, self.path)  # onto our own empty directory
            return
        reason, listed = _dir_not_ours(self.path) if os.path.lexists(self.path) else (None, {})
        if reason is not None:
            raise unsafe(f"{shown_path(self.path)} {reason}: --force replaces only a bundle dflash-diag wrote")
        if not listed:
            os.mkdir(self.path, 0o700)
            os.rename(self._tmp, self.path)
            return
        old = aside_name(self.path.parent)
        os.rename(self.path, old)  # our old bundle, intact, out of the way
        try:
            os.rename(self._tmp, self.path)
        except BaseException:
            os.rename(old, self.path)
            raise
        _remove_our_files(old, [*listed, MANIFEST_NAME], listed)


def _remove_our_files(directory: Path, names: list[str], digests: Mapping[str, str] | None = None) -> None:
    """Unlink ``names`` in ``directory`` (each only if still the file we wrote), then rmdir it if empty."""
    for name in names:
        target = directory / name
        if digests is not None and name in digests and _file_sha256(target) != digests[name]:
            continue  # changed under us: not ours any more, leave it (and so the directory)
        unlink_quietly(target)
    try:
        os.rmdir(directory)  # fails, harmlessly, if anything else is in it
    except OSError:
        pass


def prepare_output(path: Path, *, as_dir: bool, force: bool) -> PreparedOutput:
    """Check where a bundle goes and reserve its temporary sibling, before any sampling (docstring above)."""
    replace = check_destination(path, force=force, what="bundle",
                                why_not_ours=(lambda p: _dir_not_ours(p)[0]) if as_dir else _tar_not_ours)
    tmp, fd = reserve_sibling(path, as_dir=as_dir)
    return PreparedOutput(path, as_dir=as_dir, replace=replace, tmp=tmp, fd=fd)


def write_tar(path: Path, top: str, files: Mapping[str, bytes], *, force: bool, mtime_s: float) -> Path:
    """``path`` (.tar.gz, 0600) holding ``top/<name>`` for every file and MANIFEST.json, written atomically."""
    return prepare_output(path, as_dir=False, force=force).commit(files, top=top, mtime_s=mtime_s)


def write_dir(path: Path, files: Mapping[str, bytes], *, force: bool) -> Path:
    """``path/`` (0700, files 0600) with MANIFEST.json, built in a temporary sibling and renamed into place."""
    return prepare_output(path, as_dir=True, force=force).commit(files, top="", mtime_s=time.time())


# --- reading ------------------------------------------------------------------------------------------------


def _bad(source: str, why: str) -> CommandError:
    return CommandError(f"{source}: {why}", ExitCode.BAD_INPUT)


def _parse_doc(data: bytes, source: str) -> dict[str, Any]:
    """The fields of snapshot.json that ``diff`` reads, checked by shape and bounded in size (snapshot.shape)."""
    from dflash_diag.snapshot.shape import checked

    if len(data) > MAX_MEMBER_BYTES:
        raise _bad(source, f"snapshot.json is larger than {MAX_MEMBER_BYTES >> 20} MiB")
    return checked(data, source, SUPPORTED_SCHEMAS, SCHEMA_PREFIX)


def _safe_member_name(name: str) -> bool:
    parts = Path(name).parts
    return bool(parts) and not name.startswith("/") and ".." not in parts and "\\" not in name


def _member_from_tar(path: Path, name: str, what: str) -> bytes | None:
    """The bytes of the bundle's top-level ``name`` (None when it has none), every member validated first."""
    source = str(path)
    try:
        with tarfile.open(path, mode="r:*") as tar:
            members: list[tarfile.TarInfo] = []
            total = 0
            for member in tar:
                if len(members) >= MAX_MEMBERS:
                    raise _bad(source, f"more than {MAX_MEMBERS} members: not {what}")
                if not _safe_member_name(member.name):
                    raise _bad(source, f"unsafe member path {member.name!r} in the archive")
                if member.isdir():
                    continue
                if not member.isfile():
                    raise _bad(source, f"member {member.name!r} is a link or device: refusing the archive")
                if member.size > MAX_MEMBER_BYTES:
                    raise _bad(source, f"member {member.name!r} is larger than {MAX_MEMBER_BYTES >> 20} MiB")
                total += member.size
                if total > MAX_TOTAL_BYTES:
                    raise _bad(source, f"archive content exceeds {MAX_TOTAL_BYTES >> 20} MiB")
                members.append(member)
            found = [m for m in members if Path(m.name).name == name and len(Path(m.name).parts) <= 2]
            if len(found) > 1:
                raise _bad(source, f"{len(found)} {name} in the archive: not {what}")
            if not found:
                return None
            fh = tar.extractfile(found[0])
            if fh is None:
                raise _bad(source, f"{name} cannot be read from the archive")
            return fh.read(MAX_MEMBER_BYTES + 1)
    except (tarfile.TarError, EOFError, OSError, ValueError) as exc:
        if isinstance(exc, CommandError):
            raise
        detail = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
        raise _bad(source, f"not a readable .tar.gz bundle ({detail})") from None


def _bundle_member(path_text: str, name: str) -> tuple[bytes | None, bool]:
    """``name`` of a bundle (.tar.gz or directory): (its bytes or None, True); or, for a plain file, (its bytes,
    False). CommandError (exit 6) for what cannot be a bundle."""
    path = Path(path_text)
    if not path.exists():
        raise _bad(path_text, "no such file or directory")
    if path.is_dir():
        inner = path / name
        if not inner.is_file():
            return None, True
        with open(inner, "rb") as fh:
            return fh.read(MAX_MEMBER_BYTES + 1), True
    if not path.is_file():
        raise _bad(path_text, "not a regular file")
    if path.stat().st_size > MAX_TOTAL_BYTES:
        raise _bad(path_text, f"larger than {MAX_TOTAL_BYTES >> 20} MiB")
    with open(path, "rb") as fh:
        head = fh.read(4)
    try:
        is_tar = tarfile.is_tarfile(path)
    except (OSError, EOFError, zlib.error):  # a truncated or corrupt gzip: read below as one, which says so
        is_tar = False
    if head[:2] == b"\x1f\x8b" and not is_tar:
        return _gunzipped(path, path_text), False  # one gzip'd file (a saved observation, a casebook fixture)
    if head[:2] == b"\x1f\x8b" or is_tar:
        return _member_from_tar(path, name, "a dflash-diag snapshot bundle"), True
    with open(path, "rb") as fh:
        return fh.read(MAX_MEMBER_BYTES + 1), False


def _gunzipped(path: Path, path_text: str) -> bytes:
    """A gzip'd file's content, bounded (a larger one is returned one byte over the bound, refused by the caller)."""
    import gzip

    try:
        with gzip.open(path, "rb") as fh:
            return fh.read(MAX_MEMBER_BYTES + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise _bad(path_text, f"a gzip file that cannot be read ({exc})") from None


def load_snapshot(path_text: str) -> dict[str, Any]:
    """The snapshot.json of a bundle (.tar.gz), a bundle directory, or a snapshot.json file itself."""
    data, _ = _bundle_member(path_text, "snapshot.json")
    if data is None:
        raise _bad(path_text, "no snapshot.json in the bundle: not a dflash-diag snapshot bundle")
    return _parse_doc(data, path_text)


def load_observation(path_text: str) -> Observation | JobObservation:
    """The observation a bundle carries (``observation.json``: .tar.gz or directory), or an observation file
    itself (``doctor --save-observation``): bounded and checked field by field (observe.codec), CommandError
    (exit 6, one line naming the field) for anything else."""
    from dflash_diag.observe.codec import MAX_DOCUMENT_BYTES, ObservationFormatError, read_observation

    data, bundle = _bundle_member(path_text, OBSERVATION_NAME)
    if data is None:
        raise _bad(path_text, f"the bundle has no {OBSERVATION_NAME}: it was written before bundles carried their "
                              "observation (dflash-diag diff still reads it)")
    if len(data) > MAX_DOCUMENT_BYTES:
        raise _bad(path_text, f"larger than the {MAX_DOCUMENT_BYTES >> 20} MiB an observation may take")
    try:
        return read_observation(data)
    except ObservationFormatError as exc:
        where = f"{OBSERVATION_NAME}: " if bundle else ""
        raise _bad(path_text, f"{where}{exc}") from None
