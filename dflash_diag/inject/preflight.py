"""Pre-flight, from /proc only: everything that can be known about a process before anything touches it.

It exists, runs as this user, is not stopped (Ctrl-Z) nor traced by someone else, Yama allows ptrace, it is
CPython 3.11-3.14 (its exact version read from ``Py_Version`` in its memory), and the addresses of what an
injection calls are read from its ELF files (``sources/elfsyms.py``). This command's own process (or a thread of
it), and an ancestor whose main thread waits for it, are refused: an injector would stop the command that drives
it, or the ancestor could run the bootstrap only once the command has exited.
"""

from __future__ import annotations

import contextlib
import os
import platform
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass

from dflash_contract import proc
from dflash_diag.errors import AttachError, ExitCode
from dflash_diag.sources.elfsyms import ElfError, ProcessSymbols, read_version, resolve
from dflash_diag.sources.ptrace_access import has_cap_sys_ptrace, not_permitted, ptrace_scope, scope_refusal

OLDEST, NEWEST = (3, 11), (3, 14)  # CPython versions the probes can be injected into
# The system calls in which a parent waits for its child, or reads its output (first field of /proc/PID/syscall).
_WAIT_SYSCALLS = {
    "x86_64": {61: "wait4", 247: "waitid", 0: "read", 7: "poll", 23: "select", 270: "pselect6", 271: "ppoll",
               232: "epoll_wait", 281: "epoll_pwait"},
    "aarch64": {260: "wait4", 95: "waitid", 63: "read", 73: "ppoll", 72: "pselect6", 22: "epoll_pwait"},
}
_CHILD_WAITS = frozenset({"wait4", "waitid"})
# Where a thread blocks, by system call number (x86-64): to say where a main thread that runs no Python sits.
SYSCALL_NAMES_X86_64 = {0: "read", 1: "write", 7: "poll", 23: "select", 34: "pause", 35: "nanosleep", 43: "accept",
                        45: "recvfrom", 47: "recvmsg", 61: "wait4", 202: "futex", 230: "clock_nanosleep",
                        232: "epoll_wait", 247: "waitid", 270: "pselect6", 271: "ppoll", 281: "epoll_pwait",
                        288: "accept4", 441: "epoll_pwait2"}
MAX_ANCESTORS = 64
MAX_FDS_SCANNED = 4096


@dataclass(frozen=True)
class Target:
    pid: int
    start_ticks: int
    exe: str
    python: tuple[int, int] | None  # (major, minor) from libpython or the exe name; None: not known yet
    free_threaded: bool
    symbols: ProcessSymbols | None = None  # addresses of what we call, from the ELF files (None: ask the debugger)
    version: str | None = None  # "3.12.3", read from the process's Py_Version
    symbols_note: str | None = None  # why there are no symbols

    @property
    def python_label(self) -> str:
        if self.python is None:
            return "?"
        return f"{self.python[0]}.{self.python[1]}{'t' if self.free_threaded else ''}"


def _read_text(path: str, limit: int = 1 << 20) -> str:
    with open(path, "rb") as fh:
        return fh.read(limit).decode("utf-8", "replace")


def _status_fields(pid: int) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in _read_text(f"/proc/{pid}/status").splitlines():
        key, _, value = line.partition(":")
        out[key] = value.strip()
    return out


def proc_state(pid: int) -> str | None:
    """The one-letter state of /proc/<pid>/stat (R, S, D, T, t, Z...), None when the process is gone."""
    stat = proc.read_stat(pid)
    return stat.state if stat is not None else None


def _start_ticks(pid: int) -> int:
    ticks = proc.start_time_ticks(pid)
    if ticks is None:
        raise OSError(f"/proc/{pid}/stat cannot be read")
    return ticks


def python_of(maps_text: str, exe: str) -> tuple[tuple[int, int] | None, bool, bool]:
    """(version, free-threaded, looks like CPython) from the mapped files and the executable's name."""
    m = re.search(r"/libpython(\d+)\.(\d+)(t?)\.so", maps_text)
    if m:
        return (int(m.group(1)), int(m.group(2))), m.group(3) == "t", True
    m = re.fullmatch(r"python(\d+)\.(\d+)(t?)", os.path.basename(exe))
    if m:
        return (int(m.group(1)), int(m.group(2))), m.group(3) == "t", True
    name = os.path.basename(exe)
    return None, False, bool(re.fullmatch(r"python\d*", name))


def preflight(pid: int) -> Target:
    """Check everything /proc can tell before any debugger touches the process; AttachError names the fix."""
    if pid <= 0:
        raise AttachError(f"PID must be a positive integer, got {pid}", ExitCode.USAGE)
    state = proc_state(pid)
    if state is None or state in ("Z", "X"):
        raise AttachError(f"no process with PID {pid} is running", ExitCode.NO_PROCESS)
    try:
        status = _status_fields(pid)
    except OSError as exc:
        raise AttachError(f"cannot read /proc/{pid}/status: {exc.strerror}", ExitCode.PERMISSION) from None
    refuse_self_or_waiting_ancestor(pid, status)
    uids = status.get("Uid", "").split()
    me = os.geteuid()
    if uids and any(int(u) != me for u in uids[:2]):
        raise AttachError(f"PID {pid} runs as uid {uids[1]}, you are uid {me}: attach as the user that runs it "
                          f"(e.g. sudo -u '#{uids[1]}' dflash-diag attach {pid}); its board must be its own",
                          ExitCode.PERMISSION)
    if state == "T":
        raise AttachError(f"PID {pid} is stopped (Ctrl-Z or SIGSTOP): resume it first (`kill -CONT {pid}` or `fg`)",
                          ExitCode.ATTACH_FAILED)
    tracer = int(status.get("TracerPid", "0") or 0)
    if tracer:
        raise AttachError(f"PID {pid} is already traced by PID {tracer} ({_comm(tracer)}): a debugger or profiler "
                          "holds it; detach that one first", ExitCode.ATTACH_FAILED)
    refusal = scope_refusal(ptrace_scope(), has_cap_sys_ptrace())
    if refusal:
        raise AttachError(f"not allowed to attach to PID {pid}: {refusal}", ExitCode.PERMISSION)
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
        maps = _read_text(f"/proc/{pid}/maps", 16 << 20)
    except OSError as exc:
        raise AttachError(f"cannot read /proc/{pid}/maps ({exc.strerror}): {not_permitted(pid, 'inspect')}",
                          ExitCode.PERMISSION) from None
    version, free_threaded, looks_python = python_of(maps, exe)
    symbols, full, note = _symbols(pid, maps, exe)
    if symbols is not None and "Py_Version" in symbols.addresses and full is not None:
        version, looks_python = (int(full.split(".")[0]), int(full.split(".")[1])), True
    if not looks_python:
        raise AttachError(f"PID {pid} ({os.path.basename(exe)}) is not a CPython process: no libpython mapped and "
                          "the executable is not python*", ExitCode.NOT_PYTHON)
    if version is not None:
        check_version(pid, version)
    return Target(pid=pid, start_ticks=_start_ticks(pid), exe=exe, python=version, free_threaded=free_threaded,
                  symbols=symbols, version=full, symbols_note=note)


def refuse_self_or_waiting_ancestor(pid: int, status: Mapping[str, str]) -> None:
    """AttachError (exit 13) for this very process, and for an ancestor whose main thread waits for us.

    A debugger attached to its own driver stops the driver: nothing answers again, not even --timeout. An
    ancestor blocked in waitpid() (or reading our output) runs the pending call only after we exit."""
    me = os.getpid()
    tgid = int(status.get("Tgid") or pid)
    if tgid == me:
        which = "" if pid == me else f" (a thread of PID {me})"
        raise AttachError(f"PID {pid} is this dflash-diag command itself{which}: its debugger would stop the command "
                          "that drives it; give the PID of the program to look at", ExitCode.ATTACH_FAILED)
    if tgid not in ancestors(me):
        return
    why = waits_for_us(tgid)
    if why is not None:
        raise AttachError(f"PID {tgid} is an ancestor of this command and its main thread waits for the command to end "
                          f"({why}): it could run the probes' bootstrap only after the command exits; run dflash-diag "
                          "from another process (another shell, or subprocess.Popen without waiting)",
                          ExitCode.ATTACH_FAILED)


def ancestors(pid: int) -> list[int]:
    """The parent of ``pid``, its parent, ... up to init (bounded; empty when /proc cannot tell)."""
    out: list[int] = []
    st = proc.read_stat(pid)
    while st is not None and st.ppid > 1 and len(out) < MAX_ANCESTORS:
        out.append(st.ppid)
        st = proc.read_stat(st.ppid)
    return out


def waits_for_us(pid: int, machine: str | None = None) -> str | None:
    """How the main thread of ``pid`` (an ancestor) waits for this command: "wait4", "poll on its output"...;
    None when it does not (it runs, sleeps in a lock wait that attach can nudge, or /proc does not say)."""
    try:
        fields = _read_text(f"/proc/{pid}/syscall", 4096).split()
        number = int(fields[0])
    except (OSError, ValueError, IndexError):
        return None  # "running", unreadable, or not in a system call
    name = _WAIT_SYSCALLS.get(machine or platform.machine(), {}).get(number)
    if name is None:
        return None
    if name in _CHILD_WAITS:
        return f"{name}: it waits for a child to exit"
    return f"{name} on this command's output" if _shares_our_pipes(pid) else None


def syscall_name(number: int, machine: str | None = None) -> str:
    if (machine or platform.machine()) == "x86_64" and number in SYSCALL_NAMES_X86_64:
        return SYSCALL_NAMES_X86_64[number]
    return f"system call {number}"


def blocked_in(pid: int, tid: int | None = None) -> str | None:
    """The system call a thread (default: the main thread) blocks in now, from /proc; None when it runs."""
    try:
        first = _read_text(f"/proc/{pid}/task/{tid or pid}/syscall", 4096).split()[0]
    except (OSError, IndexError):
        return None
    return syscall_name(int(first)) if first.isdigit() else None


def _shares_our_pipes(pid: int) -> bool:
    """True when ``pid`` holds a pipe that is this command's stdin, stdout or stderr (it reads what we print)."""
    ours: set[tuple[int, int]] = set()
    for fd in (0, 1, 2):
        with contextlib.suppress(OSError):
            st = os.fstat(fd)
            if stat.S_ISFIFO(st.st_mode):
                ours.add((st.st_dev, st.st_ino))
    if not ours:
        return False
    try:
        names = os.listdir(f"/proc/{pid}/fd")[:MAX_FDS_SCANNED]
    except OSError:
        return False
    for name in names:
        with contextlib.suppress(OSError):
            st = os.stat(f"/proc/{pid}/fd/{name}")
            if (st.st_dev, st.st_ino) in ours:
                return True
    return False


def _symbols(pid: int, maps: str, exe: str) -> tuple[ProcessSymbols | None, str | None, str | None]:
    """The runtime's symbols and exact version, read from its files and memory without stopping it."""
    try:
        symbols = resolve(pid, maps, exe)
        if "Py_Version" not in symbols.addresses:
            return symbols, None, "no Py_Version symbol (CPython < 3.11?)"
        major, minor, micro, _level = read_version(pid, symbols.addresses["Py_Version"])
    except ElfError as exc:
        return None, None, str(exc)
    missing = {"Py_AddPendingCall", "PyRun_SimpleString", "mmap"} - set(symbols.addresses)
    if missing:
        return None, f"{major}.{minor}.{micro}", f"symbols not found: {', '.join(sorted(missing))}"
    return symbols, f"{major}.{minor}.{micro}", None


def check_version(pid: int, version: tuple[int, int]) -> None:
    if not OLDEST <= version <= NEWEST:
        raise AttachError(
            f"PID {pid} runs Python {version[0]}.{version[1]}: attach supports CPython "
            f"{OLDEST[0]}.{OLDEST[1]} to {NEWEST[0]}.{NEWEST[1]}; start it under `dflash-diag run` instead",
            ExitCode.UNSUPPORTED)


def _comm(pid: int) -> str:
    try:
        return _read_text(f"/proc/{pid}/comm").strip()
    except OSError:
        return "?"

