"""Writes the per-process board (docs/board.md): private, atomic, versioned, identifiable.

The reader is ``dflash_diag.sources.board``; it re-implements the directory rules because the layers do
not import each other. Keep the two in step (the tests read what this writes).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import stat
import sys
from pathlib import Path
from typing import Any

BOARD_SCHEMA = "dflash-diag.board/1"
BOARD_DIR_ENV = "DFLASH_DIAG_BOARD_DIR"
MAX_BOARD_BYTES = 4 * 1024 * 1024


class BoardDirError(OSError):
    """The board directory is unsafe (symlink, foreign owner, group/world access) or cannot be made."""


def default_board_dir() -> Path:
    """``$DFLASH_DIAG_BOARD_DIR``, else ``$XDG_RUNTIME_DIR/dflash-diag`` (when that is ours), else /tmp."""
    override = os.environ.get(BOARD_DIR_ENV)
    if override:
        return Path(override)
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg:
        try:
            st = os.stat(xdg)
            if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid():
                return Path(xdg) / "dflash-diag"
        except OSError:
            pass
    return Path(f"/tmp/dflash-diag-{os.getuid()}")


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` 0700 if missing; refuse a symlink, a foreign owner or group/world access."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise BoardDirError(f"cannot create board directory {path}: {exc.strerror}") from exc
    problem = unsafe_dir_reason(os.lstat(path))
    if problem is not None:
        raise BoardDirError(f"board directory {path} {problem[0]}")
    return path


def unsafe_dir_reason(st: os.stat_result) -> tuple[str, str] | None:
    """Why a board directory must not be used, as (what is wrong, what to do), or None when it is safe.

    The one definition of a private board directory, for the writer and the reader alike."""
    if stat.S_ISLNK(st.st_mode):
        return "is a symlink: refusing it", "remove it; the probes recreate it"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory", "remove it or pick another --board-dir"
    if st.st_uid != os.getuid():
        return f"belongs to uid {st.st_uid}, not to you: refusing it", "use a directory of your own"
    if st.st_mode & 0o077:
        return f"is open to other users (mode {st.st_mode & 0o777:o})", "chmod 700 it"
    return None


def proc_start_time_ticks(pid: int | str = "self") -> int:
    """Field 22 of /proc/<pid>/stat: when the process started, in clock ticks since boot."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        raw = f.read().decode("ascii", "replace")
    # comm (field 2) may contain spaces and parentheses: split after the last ')'.
    fields = raw[raw.rindex(")") + 2 :].split()
    return int(fields[19])  # field 22 is the 20th after the comm field


# Flags whose value is a secret, as "--flag=value" / "--flag value" / "key=value".
_SECRET_NAME = re.compile(
    # a whole name component (split on - _ .), so "--hf-token" and "wandb_api_key" match but "tokens_per_s",
    # "--tokenizer" and "linear_num_key_heads" do not
    r"(?:^|[-_.])(token|secret|passw(?:or)?d|passwd|api[-_]?key|apikey|auth|credentials?|private[-_]?key"
    r"|access[-_]?key|secret[-_]?key|cookie|session[-_]?key)(?:$|[-_.])",
    re.IGNORECASE,
)
# Values that are secrets whatever flag carries them (HF, OpenAI, GitHub, wandb, AWS, Slack...).
_SECRET_VALUE = re.compile(r"^(hf_[A-Za-z0-9]{8,}|sk-[A-Za-z0-9_-]{8,}|gh[pousr]_[A-Za-z0-9]{8,}|xox[abpr]-[A-Za-z0-9-]{8,}|AKIA[A-Z0-9]{12,})$")
_URL_PASSWORD = re.compile(r"(://[^/:@\s]+:)([^@/\s]+)(@)")
REDACTED = "<redacted>"


def redact_argv(argv: list[str]) -> list[str]:
    """argv with secret values replaced by ``<redacted>`` (flag names are kept: they help debugging)."""
    out: list[str] = []
    redact_next = False
    for arg in argv:
        if redact_next:
            out.append(REDACTED)
            redact_next = False
            continue
        if _SECRET_VALUE.match(arg):
            out.append(REDACTED)
            continue
        name, eq, _value = arg.partition("=")
        if eq and _SECRET_NAME.search(name):
            out.append(f"{name}={REDACTED}")
            continue
        if arg.startswith("-") and not eq and _SECRET_NAME.search(arg):
            out.append(arg)
            redact_next = True
            continue
        out.append(_URL_PASSWORD.sub(rf"\1{REDACTED}\3", arg))
    return out


def redact_mapping(value: Any, depth: int = 0) -> Any:
    """A copy of an app section with the values of secret-named keys (api_key, token, ...) redacted."""
    if depth > 8:
        return value
    if isinstance(value, dict):
        return {k: REDACTED if isinstance(k, str) and _SECRET_NAME.search(k) and v not in (None, "", False)
                else redact_mapping(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_mapping(v, depth + 1) for v in value]
    if isinstance(value, str) and _SECRET_VALUE.match(value):
        return REDACTED
    return value


def writer_identity(torch_version: str | None) -> dict[str, Any]:
    argv = list(getattr(sys, "orig_argv", None) or sys.argv)
    return {
        "pid": os.getpid(),
        "start_time_ticks": proc_start_time_ticks(),
        "argv": redact_argv(argv)[:256],
        "python": sys.version.split()[0],
        "torch": torch_version,
        "hostname": socket.gethostname(),
    }


class BoardWriter:
    """Publishes one JSON document per process into ``<dir>/<pid>.json``; never leaves a partial file."""

    def __init__(self, board_dir: Path | None = None) -> None:
        self.dir = ensure_private_dir(board_dir or default_board_dir())
        self.pid = os.getpid()
        self.path = self.dir / f"{self.pid}.json"
        self.seq = 0

    def write(self, document: dict[str, Any]) -> None:
        self.seq += 1
        document["seq"] = self.seq
        data = json.dumps(document, allow_nan=False, separators=(",", ":")).encode()
        if len(data) > MAX_BOARD_BYTES:
            raise ValueError(f"board of {len(data)} bytes exceeds {MAX_BOARD_BYTES}")
        tmp = self.dir / f"{self.pid}.json.tmp.{secrets.token_hex(6)}"
        # O_EXCL|O_NOFOLLOW: never write through a planted file or symlink.
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(tmp, flags, 0o600)
        except FileNotFoundError:
            ensure_private_dir(self.dir)  # removed under us (a /tmp cleaner): recreate it, with the same checks
            fd = os.open(tmp, flags, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            _unlink_quietly(tmp)
            raise
        os.close(fd)
        try:
            os.replace(tmp, self.path)  # atomic: readers see the old or the new board, never a mix
        except BaseException:
            _unlink_quietly(tmp)
            raise

    def remove(self) -> None:
        _unlink_quietly(self.path)


def _unlink_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
