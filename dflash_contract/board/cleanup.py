"""The clean-up of boards (and half-written temporaries) left by processes that died: only what the probes
wrote, only when its writer is gone."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from dflash_contract import proc
from dflash_contract.board.dirs import unsafe_dir_reason
from dflash_contract.board.files import pid_of_board_name
from dflash_contract.board.schema import BOARD_SCHEMA, MAX_BOARD_BYTES
from dflash_contract.board.validate import BoardFormatError, loads_strict, validate_document

_TMP_NAME = re.compile(r"^(\d{1,11})\.json\.tmp\.[0-9a-f]+$")


def _writer_of(data: bytes) -> tuple[int, int] | None:
    try:
        doc = validate_document(loads_strict(data, bounded_numbers=True))
    except (ValueError, BoardFormatError):
        return None
    return doc["writer"]["pid"], doc["writer"]["start_time_ticks"]


def remove_stale_boards(directory: Path) -> list[str]:
    """Remove boards (and half-written temporaries) whose writer is gone; return the names removed.

    Only in a safe directory of ours; only regular files of ours named ``PID.json`` / ``PID.json.tmp.HEX``;
    a board only when it is a valid board whose writer is that PID and that process is no longer running
    with the board's start time (it died, or the PID now belongs to another process); a temporary only when
    it holds what the probes write for that PID, whole or cut (empty included), and that writer no longer
    runs (with the start time the temporary records, when the write got that far). Anything else is left
    alone."""
    removed: list[str] = []
    try:
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return removed
    try:
        if unsafe_dir_reason(os.fstat(dir_fd)) is not None:
            return removed
        for name in os.listdir(dir_fd):
            if _stale_entry(dir_fd, name):
                try:
                    os.unlink(name, dir_fd=dir_fd)
                    removed.append(name)
                except OSError:
                    pass
    finally:
        os.close(dir_fd)
    return removed


def _stale_entry(dir_fd: int, name: str) -> bool:
    pid = pid_of_board_name(name)
    tmp = _TMP_NAME.match(name)
    if pid is None and tmp is None:
        return False
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
        return False
    if tmp is not None:
        tmp_pid = int(tmp.group(1))
        head = _read_head(dir_fd, name, _TMP_HEAD_BYTES)
        return proc.is_valid_pid(tmp_pid) and head is not None and _tmp_writer_gone(head, tmp_pid)
    data = _read_head(dir_fd, name, MAX_BOARD_BYTES + 1)
    writer = _writer_of(data) if data is not None and len(data) <= MAX_BOARD_BYTES else None
    if writer is None or writer[0] != pid:
        return False  # not a board of ours as we write them: not ours to delete
    return not proc.process_alive(pid, writer[1])


def _read_head(dir_fd: int, name: str, limit: int) -> bytes | None:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        return os.read(fd, limit)
    except OSError:
        return None
    finally:
        os.close(fd)


# What the probes' publisher writes (compact JSON, keys in this order): a temporary is theirs when it holds
# this header, or any cut of it (killed before or while writing, an empty file included).
_TMP_HEAD_BYTES = 256
_TICKS = re.compile(rb'"start_time_ticks":(\d{1,20})[,}]')
_TICKS_CUT = re.compile(rb'"start_time_ticks":\d{0,20}')


def _tmp_header(pid: int) -> bytes:
    return b'{"schema":"%s","writer":{"pid":%d,' % (BOARD_SCHEMA.encode(), pid)


def _tmp_writer_gone(head: bytes, pid: int) -> bool:
    """Whether ``head`` (the first bytes of ``PID.json.tmp.HEX``) is the probes' own (partial) write for
    ``pid`` and its writer no longer runs: the start time when the write got that far, else the PID alone."""
    header = _tmp_header(pid)
    if len(head) <= len(header):
        return header.startswith(head) and not proc.process_alive(pid)
    if not head.startswith(header):
        return False  # something else under one of our names: not ours to delete
    rest = head[len(header):]
    ticks = _TICKS.match(rest)
    if ticks is not None:  # ticks 0: the writer could not read its own start time; the PID alone tells
        return not proc.process_alive(pid, int(ticks[1]) or None)
    cut = _TICKS_CUT.fullmatch(rest) is not None or b'"start_time_ticks":'.startswith(rest)
    return cut and not proc.process_alive(pid)
