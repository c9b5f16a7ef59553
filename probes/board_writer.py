"""Publishes the per-process board (docs/board.md): private, atomic, versioned, identifiable, redacted.

The contract (schema, directory rules, names) is ``dflash_contract.board``; the redaction rules are
``dflash_contract.redact``, the same the bug-report bundle uses. The readers live in ``dflash_diag.sources.board``.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import sys
from pathlib import Path
from typing import Any

from dflash_contract import proc
from dflash_contract.board import (
    MAX_BOARD_BYTES,
    BoardDirError,
    WriterIdentity,
    board_file_name,
    choose_board_dir,
    ensure_private_dir,
    remove_stale_boards,
)
from dflash_contract.private_file import write_private_atomic
from dflash_contract.redact import redact_argv

__all__ = ["BoardDirError", "BoardPublisher", "writer_identity"]


def writer_identity(torch_version: str | None) -> WriterIdentity:
    argv = list(getattr(sys, "orig_argv", None) or sys.argv)
    return {
        "pid": os.getpid(),
        "start_time_ticks": proc.start_time_ticks() or 0,
        "argv": list(redact_argv(argv))[:256],
        "python": sys.version.split()[0],
        "torch": torch_version,
        "hostname": socket.gethostname(),
    }


class BoardPublisher:
    """Publishes one JSON document per process into ``<dir>/<pid>.json``; never leaves a partial file.

    ``warning`` is set when the default directory was unusable (someone else owns it) and a private
    fallback is used instead; the session prints it loudly."""

    def __init__(self, board_dir: Path | None = None) -> None:
        self.dir, self.warning = choose_board_dir(board_dir)
        remove_stale_boards(self.dir)  # boards of our processes that died (SIGKILL) never stay forever
        self.pid = os.getpid()
        self.path = self.dir / board_file_name(self.pid)
        self.seq = 0

    def write(self, document: dict[str, Any]) -> None:
        self.seq += 1
        document["seq"] = self.seq
        data = json.dumps(document, allow_nan=False, separators=(",", ":")).encode()
        if len(data) > MAX_BOARD_BYTES:
            raise ValueError(f"board of {len(data)} bytes exceeds {MAX_BOARD_BYTES}")
        tmp = self.dir / f"{board_file_name(self.pid)}.tmp.{secrets.token_hex(6)}"
        # Never through a planted file or symlink (O_EXCL|O_NOFOLLOW); atomic: readers see the old or the new board.
        try:
            write_private_atomic(self.path, data, tmp=tmp, fsync=True)
        except FileNotFoundError:
            ensure_private_dir(self.dir)  # removed under us (a /tmp cleaner): recreate it, with the same checks
            write_private_atomic(self.path, data, tmp=tmp, fsync=True)

    def remove(self) -> None:
        """Remove our own board (``<pid>.json`` of this process, in our private directory); nothing else."""
        _unlink_quietly(self.path)


def _unlink_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
