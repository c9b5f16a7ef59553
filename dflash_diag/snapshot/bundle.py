"""Writing a bundle atomically and privately, and reading one back safely (for `diff`).

Write: everything goes to a temporary sibling (0600 file / 0700 directory) that is renamed into place only
when complete, so a failure never leaves a half-written report; an existing target is refused unless forced.
Read: bundles come from other people: tar members are validated (regular files only, no absolute paths or
``..``, bounded sizes and counts) and only ``snapshot.json`` is read, into memory, never extracted.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dflash_diag.errors import CommandError, ExitCode

SCHEMA_PREFIX = "dflash-diag.snapshot/"
SUPPORTED_SCHEMAS = ("dflash-diag.snapshot/1",)
MAX_MEMBERS = 64
MAX_MEMBER_BYTES = 64 * 1024 * 1024
MAX_TOTAL_BYTES = 256 * 1024 * 1024


def default_name(pid: int, now_wall_s: float) -> str:
    return f"dflash-diag-snapshot-{pid}-{time.strftime('%Y%m%d-%H%M%S', time.localtime(now_wall_s))}"


def _refuse_existing(path: Path, force: bool) -> None:
    if (path.exists() or path.is_symlink()) and not force:
        raise CommandError(f"{path} exists: pass --force to overwrite it, or -o another path", ExitCode.EXISTS)
    if path.is_symlink():
        raise CommandError(f"{path} is a symlink: refusing to write through it", ExitCode.BAD_INPUT)


def write_tar(path: Path, top: str, files: Mapping[str, bytes], *, force: bool, mtime_s: float) -> Path:
    """``path`` (.tar.gz, 0600) holding ``top/<name>`` for every file, written atomically."""
    _refuse_existing(path, force)
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.is_dir():
        raise CommandError(f"{directory} is not a directory: create it or pick another -o", ExitCode.BAD_INPUT)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as raw, tarfile.open(fileobj=raw, mode="w:gz") as tar:
            for name, data in files.items():
                info = tarfile.TarInfo(f"{top}/{name}")
                info.size, info.mode, info.mtime = len(data), 0o600, int(mtime_s)
                tar.addfile(info, io.BytesIO(data))
            tar.close()
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, path)
    except BaseException:
        _unlink(tmp)
        raise
    return path


def write_dir(path: Path, files: Mapping[str, bytes], *, force: bool) -> Path:
    """``path/`` (0700, files 0600), built in a temporary sibling and renamed into place."""
    _refuse_existing(path, force)
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise CommandError(f"{parent} is not a directory: create it or pick another -o", ExitCode.BAD_INPUT)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent))
    try:
        for name, data in files.items():
            fd = os.open(tmp / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
        if path.exists() and not path.is_symlink():
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
        os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


# --- reading ------------------------------------------------------------------------------------------------


def _bad(source: str, why: str) -> CommandError:
    return CommandError(f"{source}: {why}", ExitCode.BAD_INPUT)


def _parse_doc(data: bytes, source: str) -> dict[str, Any]:
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise _bad(source, f"snapshot.json is not valid JSON ({exc.__class__.__name__})") from None
    if not isinstance(doc, dict):
        raise _bad(source, "snapshot.json is not a JSON object")
    schema = doc.get("schema")
    if not isinstance(schema, str) or not schema.startswith(SCHEMA_PREFIX):
        raise _bad(source, "not a dflash-diag snapshot (no 'dflash-diag.snapshot/N' schema)")
    if schema not in SUPPORTED_SCHEMAS:
        raise _bad(source, f"snapshot schema {schema} is newer than this dflash-diag understands: upgrade it")
    return doc


def _safe_member_name(name: str) -> bool:
    parts = Path(name).parts
    return bool(parts) and not name.startswith("/") and ".." not in parts and "\\" not in name


def _from_tar(path: Path) -> dict[str, Any]:
    source = str(path)
    try:
        with tarfile.open(path, mode="r:*") as tar:
            members: list[tarfile.TarInfo] = []
            total = 0
            for member in tar:
                if len(members) >= MAX_MEMBERS:
                    raise _bad(source, f"more than {MAX_MEMBERS} members: not a snapshot bundle")
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
            docs = [m for m in members if Path(m.name).name == "snapshot.json" and len(Path(m.name).parts) <= 2]
            if len(docs) != 1:
                raise _bad(source, "no snapshot.json in the archive: not a dflash-diag snapshot bundle")
            fh = tar.extractfile(docs[0])
            if fh is None:
                raise _bad(source, "snapshot.json cannot be read from the archive")
            data = fh.read(MAX_MEMBER_BYTES + 1)
    except (tarfile.TarError, EOFError, OSError, ValueError) as exc:
        if isinstance(exc, CommandError):
            raise
        detail = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
        raise _bad(source, f"not a readable .tar.gz bundle ({detail})") from None
    return _parse_doc(data, source)


def load_snapshot(path_text: str) -> dict[str, Any]:
    """The snapshot.json of a bundle (.tar.gz), a bundle directory, or a snapshot.json file itself."""
    path = Path(path_text)
    if not path.exists():
        raise _bad(path_text, "no such file or directory")
    if path.is_dir():
        path = path / "snapshot.json"
        if not path.is_file():
            raise _bad(path_text, "directory has no snapshot.json: not a snapshot bundle")
    if not path.is_file():
        raise _bad(path_text, "not a regular file")
    if path.stat().st_size > MAX_TOTAL_BYTES:
        raise _bad(path_text, f"larger than {MAX_TOTAL_BYTES >> 20} MiB")
    with open(path, "rb") as fh:
        head = fh.read(4)
    if head[:2] == b"\x1f\x8b" or tarfile.is_tarfile(path):
        return _from_tar(path)
    with open(path, "rb") as fh:
        return _parse_doc(fh.read(MAX_MEMBER_BYTES + 1), path_text)


