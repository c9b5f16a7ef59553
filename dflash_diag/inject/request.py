"""The files that carry a request and its answer, the lease, and the note of the page an injection mapped.

All live in the board directory, under the names of the protocol (``dflash_contract.attach``): created 0600 with
``O_EXCL|O_NOFOLLOW`` (never through a planted file), read back only when private, ours and bounded.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets
import stat
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dflash_contract import attach as protocol
from dflash_contract import proc
from dflash_contract.board import PROBE_NAMES
from dflash_contract.private_file import NotPrivate, TooLarge, create_private, read_private
from dflash_diag import __version__
from dflash_diag.errors import AttachError, ExitCode
from dflash_diag.inject.preflight import proc_state
from dflash_diag.inject.program import PAGE_BYTES

KNOWN_PROBES = PROBE_NAMES  # the board contract's list


@dataclass(frozen=True)
class Lease:
    """The process the probes are held for (``doctor --attach``: the command itself): with ``attach`` they detach
    by themselves once it is gone; with ``detach`` only probes held for it are detached."""

    pid: int
    start_ticks: int

    @classmethod
    def for_target(cls, target_pid: int, holder_pid: int | None = None) -> Lease | None:
        """The lease of ``holder_pid`` (default: this process) for probes in ``target_pid``; None when the target
        lives in another PID namespace (a container seen from the host): it cannot see the holder's PID.
        AttachError when the holder does not run."""
        which = os.getpid() if holder_pid is None else holder_pid
        ticks = proc.start_time_ticks(which)
        if ticks is None or not proc.process_alive(which, ticks):
            raise AttachError(f"no process with PID {which} to hold the probes' lease (it exited or never existed)",
                              ExitCode.NO_PROCESS)
        return cls(which, ticks) if same_pid_namespace(target_pid) is not False else None


def same_pid_namespace(pid: int) -> bool | None:
    """Whether ``pid`` numbers processes as we do (its PID namespace is ours); None when /proc does not say."""
    try:
        return os.stat(f"/proc/{pid}/ns/pid").st_ino == os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None


@dataclass
class Request:
    directory: Path
    pid: int
    nonce: str = field(default_factory=lambda: secrets.token_hex(protocol.NONCE_HEX_CHARS // 2))

    @property
    def control(self) -> Path:
        return self.directory / protocol.control_name(self.pid, self.nonce)

    @property
    def result(self) -> Path:
        return self.directory / protocol.result_name(self.pid, self.nonce)

    @property
    def script(self) -> Path:
        return self.directory / protocol.script_name(self.pid, self.nonce)

    @property
    def prefix(self) -> Path:
        """Where the files of this request start (a kernel recording adds its own suffixes)."""
        return self.directory / protocol.request_prefix(self.pid, self.nonce)

    def paths(self) -> tuple[Path, ...]:
        c, r = str(self.control), str(self.result)
        return (self.control, Path(c + protocol.CLAIMED_SUFFIX), self.result, Path(r + protocol.TMP_SUFFIX), self.script)


def write_private(path: Path, data: bytes) -> None:
    """Create ``path`` 0600 (O_EXCL|O_NOFOLLOW: never through a planted file), fully written or not at all."""
    create_private(path, data)


def control_document(req: Request, action: str, names: Sequence[str], board_dir: str | None, deadline_wall_s: float,
                     method: str, package_root: str, lease: Lease | None = None,
                     kernels: Mapping[str, Any] | None = None) -> dict[str, Any]:
    if action not in protocol.ACTIONS:
        raise AttachError(f"unknown action {action!r}", ExitCode.USAGE)
    extra: dict[str, Any] = {}
    if action == "kernels":
        extra["kernels"] = dict(kernels or {})
        try:
            protocol.check_kernels(extra["kernels"])  # the bootstrap checks it again
        except ValueError as exc:
            raise AttachError(str(exc), ExitCode.USAGE) from None
    unknown = sorted(set(names) - set(KNOWN_PROBES))
    if unknown:
        raise AttachError(f"unknown probes: {', '.join(unknown)} (known: {', '.join(KNOWN_PROBES)})", ExitCode.USAGE)
    return {
        "schema": protocol.SCHEMA, "action": action, "nonce": req.nonce, "pid": req.pid, "version": __version__,
        "package_root": package_root, "probes": sorted(set(names)), "board_dir": board_dir,
        "result_path": str(req.result), "deadline_wall_s": deadline_wall_s, "discover": True, "method": method,
        "attacher_pid": os.getpid(),
        "lease": None if lease is None else {"pid": lease.pid, "start_ticks": lease.start_ticks},
        **extra,
    }


def read_result(path: Path, nonce: str) -> dict[str, Any] | None:
    """The bootstrap's answer once it is there (private, ours, bounded, this nonce), else None."""
    try:
        data = read_private(path, protocol.MAX_RESULT_BYTES)
    except (NotPrivate, TooLarge):
        raise AttachError(f"the attach result {path} is not a private file of yours: refusing it",
                          ExitCode.ATTACH_FAILED) from None
    except OSError as exc:
        raise AttachError(f"cannot read the attach result {path}: {exc.strerror}", ExitCode.ATTACH_FAILED) from None
    if data is None:
        return None
    try:
        value = json.loads(data)
    except ValueError:
        raise AttachError(f"the attach result {path} is not JSON", ExitCode.ATTACH_FAILED) from None
    if not isinstance(value, dict) or value.get("schema") != protocol.SCHEMA or value.get("nonce") != nonce:
        raise AttachError(f"the attach result {path} is not the answer to this request", ExitCode.ATTACH_FAILED)
    return value


def remove_quietly(paths: Sequence[Path]) -> None:
    for p in paths:
        with contextlib.suppress(OSError):
            os.unlink(p)


def clean_stale(directory: Path, max_age_s: float = 600.0) -> None:
    """Remove request files this command left behind (a killed attach): only our own names, only old ones."""
    now = time.time()
    with contextlib.suppress(OSError):
        for entry in os.scandir(directory):
            lock = protocol.LOCK_FILE.fullmatch(entry.name)
            if lock is not None:  # only once its process is gone (a held lock may be as old as a --timeout)
                if proc_state(int(lock.group(1))) in (None, "Z", "X") and entry.is_file(follow_symlinks=False):
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)
                continue
            if not protocol.OWN_FILE.fullmatch(entry.name):
                continue
            with contextlib.suppress(OSError):
                st = entry.stat(follow_symlinks=False)
                pid = int(protocol.OWN_FILE.fullmatch(entry.name).group(1))  # type: ignore[union-attr]
                if now - st.st_mtime > max_age_s or proc_state(pid) in (None, "Z", "X"):
                    os.unlink(entry.path)


@contextlib.contextmanager
def injection_lock(directory: Path, pid: int) -> Iterator[None]:
    """Hold the one injection into ``pid`` from this board directory; AttachError (exit 13) when another command
    holds it. Two at once shared the page the tool maps in the process: the second's program overwrote the first's
    while the first's call was still queued, and the first waited its whole timeout for an answer that could not
    come, then blamed the process ("its main thread ran no Python code")."""
    path = directory / protocol.lock_name(pid)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise AttachError(f"cannot create the injection lock {path}: {exc.strerror}", ExitCode.ATTACH_FAILED) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            raise AttachError(f"the injection lock {path} is not a file of yours: refusing it", ExitCode.ATTACH_FAILED)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise in_flight_error(pid) from None
        yield
    finally:
        os.close(fd)  # releases the lock; the file stays (removing it could let two commands lock two files)


def in_flight_error(pid: int) -> AttachError:
    return AttachError(f"another dflash-diag attach, detach or record --kernels is injecting into PID {pid} right now: "
                       "wait for it to finish, then run this again", ExitCode.ATTACH_FAILED)


def injection_in_flight(directory: Path, pid: int) -> bool:
    """Whether another command holds ``pid``'s injection lock now (its file is never created here): the tracer a
    second attach finds mid-injection is then the first one's, said as such, not as an unknown debugger."""
    try:
        fd = os.open(directory / protocol.lock_name(pid), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
    return False


def page_note_path(directory: Path, pid: int) -> Path:
    return directory / protocol.page_name(pid)


def reusable_page(directory: Path, pid: int, start_ticks: int) -> int | None:
    """The page an earlier, completed injection mapped, when it is still there exactly as we left it."""
    try:
        state = json.loads(page_note_path(directory, pid).read_bytes()[:4096])
        addr = int(state["addr"])
        if int(state["start_ticks"]) != start_ticks or not state.get("done"):
            return None
        with open(f"/proc/{pid}/maps", "rb") as fh:
            maps = fh.read(16 << 20).decode("utf-8", "replace")
    except (OSError, ValueError, KeyError, TypeError):
        return None
    pattern = rf"^{addr:x}-{addr + PAGE_BYTES:x} rw-p 00000000 00:00 0\s*$"
    return addr if re.search(pattern, maps, re.M) else None


def note_page(directory: Path, pid: int, start_ticks: int, addr: int) -> None:
    """Remember the page just queued (not done: a pending call still points at it)."""
    path = page_note_path(directory, pid)
    with contextlib.suppress(OSError):
        os.unlink(path)
    with contextlib.suppress(OSError):
        write_private(path, json.dumps({"addr": addr, "start_ticks": start_ticks, "done": False}).encode())


def mark_page_done(directory: Path, pid: int) -> None:
    """The bootstrap answered: the pending call ran, its page may be written again by the next injection."""
    path = page_note_path(directory, pid)
    try:
        state = json.loads(path.read_bytes()[:4096])
        state["done"] = True
        os.unlink(path)
        write_private(path, json.dumps(state).encode())
    except (OSError, ValueError):
        pass


def forget_page(directory: Path, pid: int) -> None:
    """A request cancelled with its call still queued: that page is never reused."""
    with contextlib.suppress(OSError):
        os.unlink(page_note_path(directory, pid))
