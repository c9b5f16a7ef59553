"""Reads and validates the probe board of a process (docs/board.md).

Everything read is checked: the directory (no symlink, ours, 0700), the file (regular, ours, not a
symlink, at most 4 MiB), the JSON (finite numbers, bounded nesting), every field's type, that the writer
is the file's PID, and that it is the *live* process with that PID (start time from /proc), not an
earlier one whose PID was reused. Any failure is a :class:`BoardError` with a one-line message.

The directory rules mirror ``probes.board_writer`` (the layers do not import each other).
"""

from __future__ import annotations

import errno
import json
import math
import os
import stat
from pathlib import Path
from typing import Any

from dflash_diag.errors import BoardError, ExitCode
from dflash_diag.model.board import BOARD_SCHEMA, Board, BoardWriter

# Where boards live is one protocol, defined once by the writer (stdlib-only module, no torch import).
from probes.board_writer import BOARD_DIR_ENV, default_board_dir, unsafe_dir_reason  # noqa: F401 - re-exported

MAX_BOARD_BYTES = 4 * 1024 * 1024
PROBE_STATUSES = frozenset({"ok", "na", "error"})
HOW_TO_PROBE = ("add the probes to it now with `dflash-diag attach PID`, or run it under probes: "
                "`dflash-diag run -- python script.py ...` (the reference trainer has them on by default)")


def _error(message: str, exit_code: int = ExitCode.BAD_INPUT) -> BoardError:
    err = BoardError(message)
    err.exit_code = exit_code
    return err


def check_board_dir(path: Path) -> Path:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise _error(f"no board directory {path}: no process has published probes there; {HOW_TO_PROBE}") from None
    except OSError as exc:
        raise _error(f"cannot read board directory {path}: {exc.strerror}") from None
    problem = unsafe_dir_reason(st)
    if problem is not None:
        raise _error(f"board directory {path} {problem[0]} ({problem[1]})")
    return path


def proc_start_time_ticks(pid: int) -> int | None:
    """Field 22 of /proc/<pid>/stat, or None when no such process is running."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode("ascii", "replace")
        return int(raw[raw.rindex(")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def find_board(pid: int, board_dir: Path | str | None = None) -> Path:
    """The board file of ``pid``; BoardError (one line, says what to do) when there is none."""
    directory = check_board_dir(Path(board_dir) if board_dir is not None else default_board_dir())
    path = directory / f"{pid}.json"
    if not os.path.lexists(path):
        if proc_start_time_ticks(pid) is None:
            raise _error(f"no process with PID {pid} is running", ExitCode.NO_PROCESS)
        raise _error(f"process {pid} has no probe board in {directory}: {HOW_TO_PROBE.replace('PID', str(pid))}")
    return path


def list_boards(board_dir: Path | str | None = None) -> list[Board | BoardError]:
    """Every board in the directory, each validated against its live process (errors as values)."""
    directory = Path(board_dir) if board_dir is not None else default_board_dir()
    if not os.path.lexists(directory):
        return []
    check_board_dir(directory)
    out: list[Board | BoardError] = []
    for path in sorted(directory.glob("*.json"), key=lambda p: p.name):
        if _pid_from_name(path) is None:
            continue
        try:
            out.append(read_board(path))
        except BoardError as exc:
            out.append(exc)
    return out


def read_board(target: int | str | Path, board_dir: Path | str | None = None, *, check_live: bool = True) -> Board:
    """Read and validate a board, by PID (looked up in the board directory) or by path.

    ``check_live`` (default) requires the writer to be the running process with that PID; set it False
    to read the board of a process that is gone (a left-over file, a bundle).
    """
    if isinstance(target, int) and not isinstance(target, bool):
        path = find_board(target, board_dir)
    elif isinstance(target, (str, Path)):
        path = Path(target)
    else:
        raise _error(f"not a PID or a board path: {target!r}")
    data = _read_file(path)
    board = parse_board(data, str(path))
    expected_pid = _pid_from_name(path)
    if expected_pid is not None and board.writer.pid != expected_pid:
        raise _error(f"board {path} was written by PID {board.writer.pid}, not {expected_pid}: refusing it")
    if check_live:
        ticks = proc_start_time_ticks(board.writer.pid)
        if ticks is None:
            raise _error(f"process {board.writer.pid} is not running; {path} is left over from it", ExitCode.NO_PROCESS)
        if ticks != board.writer.start_time_ticks:
            raise _error(
                f"board {path} belongs to an earlier process with PID {board.writer.pid} (start time differs): "
                "it is stale; the running process has no board"
            )
    return board


def _pid_from_name(path: Path) -> int | None:
    stem = path.name[: -len(".json")] if path.name.endswith(".json") else None
    return int(stem) if stem is not None and stem.isascii() and stem.isdigit() and len(stem) < 12 else None


def _read_file(path: Path) -> bytes:
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _error(f"board {path} is a symlink: refusing it") from None
        if exc.errno == errno.ENOENT:
            raise _error(f"board {path} does not exist (the process exited or never ran under probes)") from None
        raise _error(f"cannot open board {path}: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _error(f"board {path} is not a regular file: refusing it")
        if st.st_uid != os.getuid():
            raise _error(f"board {path} belongs to uid {st.st_uid}, not to you: refusing it")
        if st.st_size > MAX_BOARD_BYTES:
            raise _error(f"board {path} is {st.st_size} bytes, over the {MAX_BOARD_BYTES} limit: refusing it")
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            total += len(chunk)
            if total > MAX_BOARD_BYTES:
                raise _error(f"board {path} grew over the {MAX_BOARD_BYTES}-byte limit: refusing it")
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name}")


def parse_board(data: bytes, path: str) -> Board:
    """Validate a board document; BoardError says what is wrong with it."""
    if not data.strip():
        raise _error(f"board {path} is empty (truncated?)")
    try:
        doc = json.loads(data.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError:
        raise _error(f"board {path} is not UTF-8 text: corrupt") from None
    except (ValueError, RecursionError) as exc:
        raise _error(f"board {path} is not valid JSON (corrupt or truncated): {str(exc)[:120]}") from None
    try:
        return _validate(doc, path)
    except _Invalid as exc:
        raise _error(f"board {path} is malformed: {exc}") from None


class _Invalid(ValueError):
    pass


def _get(doc: dict[str, Any], key: str, kinds: tuple[type, ...], where: str = "") -> Any:
    if key not in doc:
        raise _Invalid(f"missing {where}{key}")
    value = doc[key]
    if isinstance(value, bool) and bool not in kinds:
        raise _Invalid(f"{where}{key} has the wrong type (bool)")
    if not isinstance(value, kinds):
        raise _Invalid(f"{where}{key} has the wrong type ({type(value).__name__})")
    if isinstance(value, float) and not math.isfinite(value):
        raise _Invalid(f"{where}{key} is not a finite number")
    return value


def _validate(doc: Any, path: str) -> Board:
    if not isinstance(doc, dict):
        raise _Invalid("the document is not a JSON object")
    schema = _get(doc, "schema", (str,))
    if schema != BOARD_SCHEMA:
        raise _Invalid(f"schema {schema[:60]!r} is not {BOARD_SCHEMA!r} (written by another dflash-diag version?)")
    w = _get(doc, "writer", (dict,))
    pid = _get(w, "pid", (int,), "writer.")
    ticks = _get(w, "start_time_ticks", (int,), "writer.")
    argv = _get(w, "argv", (list,), "writer.")
    if pid <= 0 or ticks < 0 or not all(isinstance(a, str) for a in argv):
        raise _Invalid("writer has an invalid pid, start_time_ticks or argv")
    torch_version = w.get("torch")
    if torch_version is not None and not isinstance(torch_version, str):
        raise _Invalid("writer.torch has the wrong type")
    writer = BoardWriter(
        pid=pid,
        start_time_ticks=ticks,
        argv=tuple(argv),
        python=_get(w, "python", (str,), "writer."),
        torch=torch_version,
        hostname=_get(w, "hostname", (str,), "writer."),
    )
    seq = _get(doc, "seq", (int,))
    wall = float(_get(doc, "wall_time_s", (int, float)))
    interval = float(_get(doc, "interval_s", (int, float)))
    if seq < 0 or wall < 0 or interval <= 0:
        raise _Invalid("seq, wall_time_s or interval_s out of range")
    threads_raw = _get(doc, "threads", (dict,))
    threads: dict[int, str] = {}
    for tid, name in threads_raw.items():
        if not (tid.isascii() and tid.isdigit() and len(tid) < 12 and isinstance(name, str)):
            raise _Invalid(f"threads entry {tid[:20]!r} is not TID -> name")
        threads[int(tid)] = name
    probes_raw = _get(doc, "probes", (dict,))
    for name, payload in probes_raw.items():
        if not isinstance(payload, dict):
            raise _Invalid(f"probe {name[:40]!r} payload is not an object")
        status = payload.get("status")
        if status not in PROBE_STATUSES:
            raise _Invalid(f"probe {name[:40]!r} has status {str(status)[:20]!r}, not ok/na/error")
        if status != "ok" and not isinstance(payload.get("reason"), str):
            raise _Invalid(f"probe {name[:40]!r} is {status} without a reason")
    app = _get(doc, "app", (dict,))
    session = doc.get("session", {})
    if not isinstance(session, dict):
        raise _Invalid("session has the wrong type")
    publish_interval = doc.get("publish_interval_s")
    if publish_interval is not None and (isinstance(publish_interval, bool) or not isinstance(publish_interval, (int, float))):
        raise _Invalid("publish_interval_s has the wrong type")
    return Board(
        schema=schema,
        writer=writer,
        seq=seq,
        wall_time_s=wall,
        interval_s=interval,
        threads=threads,
        probes=probes_raw,
        app=app,
        path=path,
        session=session,
        final=doc.get("final") is True,
        publish_interval_s=float(publish_interval) if publish_interval is not None else None,
    )


def staleness(board: Board, now_wall_s: float) -> str | None:
    """A one-line warning when the board stopped updating, else None (pure: pass ``now``)."""
    age_s = board.age_s(now_wall_s)
    limit_s = max(5.0, 4 * board.interval_s)
    if age_s > limit_s:
        return f"no update for {age_s:.0f} s: hung? (the board thread publishes every {board.interval_s:g} s)"
    last_step = board.session.get("last_step_wall_s")
    if isinstance(last_step, (int, float)) and not isinstance(last_step, bool) and board.session.get("steps"):
        quiet_s = now_wall_s - float(last_step)
        if quiet_s > 60.0:
            return f"no training step for {quiet_s:.0f} s (the process is alive and publishing): stalled?"
    return None
