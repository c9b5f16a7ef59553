"""Finds, reads and validates the probe board of a process (docs/board.md).

The contract (schema, bounds, directory rules, staleness) is ``dflash_contract.board``; this module adds
the look-up and the user-facing errors. Everything read is checked: the directory and the file (no symlink
at either level, owned by the process's user, 0700/0600, at most 4 MiB), the JSON (finite numbers, bounded
nesting), every field's type, that the writer is the file's PID, and that it is the *live* process with
that PID (start time from /proc), not an earlier one whose PID was reused. What is read is redacted again
(the same rules the writer applies, to thread and queue names too), so a board from an older or foreign writer
cannot leak a secret into anything we print; a live process's board also loses every secret value of its argv
and environment (``sources.redaction``). Any failure is a :class:`BoardError` with a one-line message that says
what to do.

A board is looked for where the process's own environment says it publishes (``/proc/PID/environ``,
readable by the same user and root), then in its user's runtime directory, ``/tmp/dflash-diag-UID`` and
the private fallbacks the probes use when that one was taken by someone else. Root finds other users'
boards this way; another user gets a clear "private to uid N" instead of "run it under probes".
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dflash_contract import proc
from dflash_contract.board import (
    BOARD_DIR_ENV,
    NO_STEP_STALL_S,
    BoardDirError,
    BoardDocument,
    BoardFormatError,
    SessionKeys,
    board_file_name,
    candidate_dirs,
    default_board_dir,
    iter_board_names,
    parse_document,
    pid_of_board_name,
    read_board_bytes,
    remove_stale_boards,
    stale_after_s,
    unsafe_dir_reason,
)
from dflash_diag.errors import BoardError, ExitCode
from dflash_diag.model.board import Board, WriterIdentity
from dflash_diag.model.text import printable, printable_tree
from dflash_diag.sources.redaction import ProcessRedactor, redactor_for

__all__ = ["BOARD_DIR_ENV", "default_board_dir", "find_board", "list_boards", "parse_board", "read_board", "staleness"]

HOW_TO_PROBE = ("add the probes to it now with `dflash-diag attach PID`, or run it under probes: "
                "`dflash-diag run -- python script.py ...` (the reference trainer has them on by default)")


def _error(message: str, exit_code: int = ExitCode.BAD_INPUT) -> BoardError:
    err = BoardError(message)
    err.exit_code = exit_code
    return err


def _dirs_for(pid: int, board_dir: Path | str | None) -> list[tuple[Path, int]]:
    owner = proc.owner_uid(pid)
    if board_dir is not None:
        # An explicit directory: ours, or (as root) the target's user's.
        expected = owner if os.getuid() == 0 and owner is not None else os.getuid()
        return [(Path(os.fsdecode(board_dir)), expected)]
    return candidate_dirs(pid)


def find_board(pid: int, board_dir: Path | str | None = None) -> tuple[Path, int]:
    """(board file, uid that must own it) of ``pid``; BoardError (one line, says what to do) when none."""
    if not proc.is_valid_pid(pid):
        raise _error(f"{pid} is not a valid PID (1..{proc.PID_MAX})", ExitCode.USAGE)
    if not proc.process_alive(pid):
        raise _error(f"no process with PID {pid} is running", ExitCode.NO_PROCESS)
    owner = proc.owner_uid(pid)
    if board_dir is None and owner is not None and owner != os.getuid() and os.getuid() != 0:
        raise _error(f"process {pid} runs as uid {owner}: its probe board (if any) is private to that user; "
                     "run this as that user or as root", ExitCode.PERMISSION)
    problems: list[str] = []
    searched: list[str] = []
    for directory, expected in _dirs_for(pid, board_dir):
        searched.append(str(directory))
        path = directory / board_file_name(pid)
        try:
            st = os.lstat(directory)
        except FileNotFoundError:
            continue
        except OSError as exc:
            problems.append(f"{directory}: {exc.strerror}")
            continue
        problem = unsafe_dir_reason(st, expected)
        if problem is not None:
            problems.append(f"board directory {directory} {problem[0]}; {problem[1]}")
            continue
        if os.path.lexists(path):
            return path, expected
        if _unreadable_dir(directory):
            problems.append(f"board directory {directory} cannot be read by uid {os.getuid()}")
    if problems:
        raise _error(problems[0])
    where = ", ".join(searched[:3]) + (" ..." if len(searched) > 3 else "")
    raise _error(f"process {pid} has no probe board (looked in {where}): {HOW_TO_PROBE.replace('PID', str(pid))}")


def _unreadable_dir(directory: Path) -> bool:
    try:
        os.listdir(directory)
    except PermissionError:
        return True
    except OSError:
        return False
    return False


def list_boards(board_dir: Path | str | None = None) -> list[Board | BoardError]:
    """Every board in our board directories (or ``board_dir``), each validated against its live process.

    Boards left by processes that died are removed first (only ours: see ``remove_stale_boards``)."""
    if board_dir is not None:
        dirs = [(Path(os.fsdecode(board_dir)), os.getuid())]
    else:
        dirs = candidate_dirs(None)
    out: list[Board | BoardError] = []
    seen: set[int] = set()
    for directory, expected in dirs:
        if not os.path.lexists(directory):
            continue
        try:
            _check_dir(directory, expected)
        except BoardError as exc:
            if board_dir is not None:
                raise
            out.append(exc)
            continue
        remove_stale_boards(directory)
        for name, pid in iter_board_names(directory):
            if pid in seen:
                continue
            seen.add(pid)
            try:
                out.append(_read(directory, name, expected, check_live=True))
            except BoardError as exc:
                out.append(exc)
    return out


def _check_dir(directory: Path, expected: int) -> None:
    try:
        st = os.lstat(directory)
    except OSError as exc:
        raise _error(f"cannot read board directory {directory}: {exc.strerror}") from None
    problem = unsafe_dir_reason(st, expected)
    if problem is not None:
        raise _error(f"board directory {directory} {problem[0]} ({problem[1]})")


def read_board(target: int | str | Path, board_dir: Path | str | None = None, *, check_live: bool = True) -> Board:
    """Read and validate a board, by PID (looked up as described above) or by path.

    ``check_live`` (default) requires the writer to be the running process with that PID; set it False
    to read the board of a process that is gone (a left-over file, a bundle).
    """
    if isinstance(target, int) and not isinstance(target, bool):
        path, expected = find_board(target, board_dir)
    elif isinstance(target, (str, Path)):
        path = Path(target)
        expected = os.getuid()
        if os.getuid() == 0:
            try:
                expected = os.lstat(path.parent).st_uid
            except OSError:
                pass
    else:
        raise _error(f"not a PID or a board path: {target!r}")
    return _read(path.parent, path.name, expected, check_live=check_live)


def _read(directory: Path, name: str, expected_uid: int, *, check_live: bool) -> Board:
    path = directory / name
    try:
        data = read_board_bytes(directory, name, expected_uid)
    except FileNotFoundError:
        raise _error(f"board {path} does not exist (the process exited or never ran under probes)") from None
    except BoardDirError as exc:
        raise _error(str(exc)) from None
    except BoardFormatError as exc:
        raise _error(f"board {path} {exc}") from None
    expected_pid = pid_of_board_name(name)
    # A live writer's own secrets (argv, environment) are known: hidden wherever its board repeats them.
    board = parse_board(data, str(path), redactor_for(expected_pid) if check_live and expected_pid else None)
    if expected_pid is not None and board.writer.pid != expected_pid:
        raise _error(f"board {path} was written by PID {board.writer.pid}, not {expected_pid}: refusing it")
    if check_live:
        ticks = proc.start_time_ticks(board.writer.pid)
        if ticks is None or not proc.process_alive(board.writer.pid):
            raise _error(f"process {board.writer.pid} is not running; {path} is left over from it", ExitCode.NO_PROCESS)
        if ticks != board.writer.start_time_ticks:
            raise _error(
                f"board {path} belongs to an earlier process with PID {board.writer.pid} (start time differs): "
                "it is stale; the running process has no board"
            )
    return board


def parse_board(data: bytes, path: str, redactor: ProcessRedactor | None = None) -> Board:
    """Validate a board document (and redact it again: the rules, and the known values of ``redactor``);
    BoardError says what is wrong with it."""
    try:
        doc = parse_document(data)
    except BoardFormatError as exc:
        raise _error(f"board {path} is malformed: {exc}" if not str(exc).startswith(("empty", "not ")) else
                     f"board {path} is {exc}") from None
    return _to_model(doc, path, redactor or ProcessRedactor())


def _to_model(doc: BoardDocument, path: str, redactor: ProcessRedactor) -> Board:
    w = doc["writer"]
    writer = WriterIdentity(
        pid=w["pid"],
        start_time_ticks=w["start_time_ticks"],
        argv=tuple(printable(a) for a in redactor.argv(w["argv"])),
        python=printable(w["python"]),
        torch=None if w["torch"] is None else printable(w["torch"]),
        hostname=printable(w["hostname"]),
    )
    return Board(
        schema=doc["schema"],
        writer=writer,
        seq=doc["seq"],
        wall_time_s=doc["wall_time_s"],
        interval_s=doc["interval_s"],
        threads={tid: printable(redactor.text(name)) for tid, name in doc["threads"].items()},
        probes=_redacted_mapping(doc["probes"], redactor),
        app=_redacted_mapping(doc["app"], redactor),
        path=printable(path),
        session=_redacted_mapping(doc["session"], redactor),
        final=doc["final"],
        publish_interval_s=doc["publish_interval_s"],
    )


def _redacted_mapping(value: Mapping[str, Any], redactor: ProcessRedactor) -> dict[str, Any]:
    """Redacted with the writer's rules (a foreign or older writer may not have) and the process's known secret
    values (queue names are keys: they go through the rules too), and made printable."""
    out = printable_tree(redactor.tree(value))
    return out if isinstance(out, dict) else {}


def staleness(board: Board, now_wall_s: float) -> str | None:
    """A one-line warning when the board stopped updating, else None (pure: pass ``now``).

    The rule is the contract's (``stale_after_s``), the same for `board`, `doctor` and `top`."""
    age_s = board.age_s(now_wall_s)
    if age_s > stale_after_s(board.interval_s):
        return f"no update for {age_s:.0f} s: hung? (the board thread publishes every {board.interval_s:g} s)"
    last_step = board.session.get(SessionKeys.LAST_STEP_WALL_S)
    if isinstance(last_step, (int, float)) and not isinstance(last_step, bool) and board.session.get(SessionKeys.STEPS):
        quiet_s = now_wall_s - float(last_step)
        if quiet_s > NO_STEP_STALL_S:
            return f"no training step for {quiet_s:.0f} s (the process is alive and publishing): stalled?"
    return None
