"""Start (or stop) the probes inside a running CPython process from outside: `dflash-diag attach` / `detach`.

How (docs/attach.md has the whole story):

1. Pre-flight from /proc, without touching the process: it exists, runs as you, is not stopped or already
   traced, ptrace is allowed (Yama, CAP_SYS_PTRACE), and it is CPython 3.11-3.14 (libpython or the exe).
2. A private control file (0600, in the board directory) says what to do: an action from a fixed enum,
   validated probe names, the board directory, a deadline, a nonce.
3. The process runs a *fixed* program at a safe point of its interpreter; that program execs the installed
   ``probes/_attach_boot.py`` with the control file's path. Two ways to get there:
   - a debugger (gdb, cuda-gdb or lldb) attaches, maps one page with ``mmap``, writes the fixed program
     into it and queues ``Py_AddPendingCall(PyRun_SimpleString, page)``, then detaches: the process is
     stopped for well under a second and nothing runs while it is stopped. The main thread runs the call at
     its next eval-loop check (the interpreter's own safe point, the one signal handlers use). A main thread
     parked in a Python lock (``join()``, ``Queue.get()``, ``Event.wait()``) is woken with a spurious EINTR,
     which Python answers by running pending calls and waiting again (x86-64 only);
   - Python 3.14's ``sys.remote_exec`` (PEP 768), run by an interpreter of the target's version.
4. The bootstrap writes a result file (0600); we wait for it with a timeout. On timeout the control file is
   deleted first: a late pending call finds nothing to claim and does nothing.

The debugger is driven one command at a time over a pipe, in its own session: a Ctrl-C in our terminal does
not reach it; if we die, it reads EOF and detaches, and the kernel sends it SIGTERM (PR_SET_PDEATHSIG), on
which it detaches and quits too, even when it was not reading. It is killed only between commands (never inside
a call into the process), and the process is sent SIGCONT if it is left stopped. ``timeout_s`` bounds every
wait: each debugger command gets what is left of it (a call into the process already in flight at the
deadline gets CALL_GRACE_S more, a bootstrap that already claimed the request CLAIMED_GRACE_S more).

This command's own process (or one of its threads), and an ancestor whose main thread waits for it, are
refused before anything runs: the debugger would stop the command that drives it, or the ancestor could run
the bootstrap only once the command has exited.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import platform
import re
import secrets
import select
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dflash_contract import proc
from dflash_contract.board import PROBE_NAMES
from dflash_diag import __version__
from dflash_diag.errors import AttachError, ExitCode
from dflash_diag.sources.elfsyms import ElfError, ProcessSymbols, read_version, resolve

SCHEMA = "dflash-diag.attach/1"
ACTIONS = ("attach", "detach", "inventory")
METHODS = ("auto", "remote-exec", "gdb", "cuda-gdb", "lldb")
DEBUGGERS = ("gdb", "cuda-gdb", "lldb")
OLDEST, NEWEST = (3, 11), (3, 14)  # CPython versions the probes can be injected into
KNOWN_PROBES = PROBE_NAMES  # the board contract's list
PAGE_BYTES = 4096
DEFAULT_TIMEOUT_S = 30.0
PTRACE_FIX = ("run as root, or `sudo sysctl kernel.yama.ptrace_scope=0`, or in a container add the SYS_PTRACE "
              "capability (docker run --cap-add SYS_PTRACE)")

# Paths that may appear in the fixed program: absolute, plain characters (no quote, backslash, newline).
_SAFE_PATH = re.compile(r"/[A-Za-z0-9._/+@=-]{1,400}")
# The C functions a main thread parked in a Python-level lock wait sits under (3.11/3.12; 3.13+).
_LOCK_WAIT_FUNCS = frozenset({"PyThread_acquire_lock_timed", "_PyMutex_LockTimed", "_PySemaphore_Wait",
                              "_PyParkingLot_Park", "PyMutex_Lock"})
_RESTART_ERRNOS = frozenset({-512, -513, -514, -516})  # ERESTARTSYS, ERESTARTNOINTR, ERESTARTNOHAND, ERESTART_RESTARTBLOCK
_FUTEX_X86_64 = 202
# The system calls in which a parent waits for its child, or reads its output (first field of /proc/PID/syscall).
_WAIT_SYSCALLS = {
    "x86_64": {61: "wait4", 247: "waitid", 0: "read", 7: "poll", 23: "select", 270: "pselect6", 271: "ppoll",
               232: "epoll_wait", 281: "epoll_pwait"},
    "aarch64": {260: "wait4", 95: "waitid", 63: "read", 73: "ppoll", 72: "pselect6", 22: "epoll_pwait"},
}
_CHILD_WAITS = frozenset({"wait4", "waitid"})
MAX_ANCESTORS = 64
MAX_FDS_SCANNED = 4096
CALL_GRACE_S = 10.0  # a call into the process in flight at the deadline: killing the debugger then kills the process
CLAIMED_GRACE_S = 10.0  # the bootstrap claimed the request: it runs, its answer is a moment away
FINISH_S = 1.0  # the least a debugger gets to detach and quit before it is killed (between commands)
PR_SET_PDEATHSIG = 1


# --- what we know about the target before touching it ---------------------------------------------------


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


def ptrace_scope() -> int | None:
    try:
        value = _read_text("/proc/sys/kernel/yama/ptrace_scope").strip()
    except OSError:
        return None
    return int(value) if value.isdigit() else None


def has_cap_sys_ptrace(status_text: str | None = None) -> bool:
    text = status_text if status_text is not None else _read_text("/proc/self/status")
    for line in text.splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) & (1 << 19))
    return False


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


def scope_refusal(scope: int | None, cap: bool) -> str | None:
    """Why Yama forbids us to attach before we try (scope 1 is left to the attempt: PR_SET_PTRACER may allow it)."""
    if scope == 3:
        return "kernel.yama.ptrace_scope is 3: no process may be traced on this machine until reboot"
    if scope == 2 and not cap:
        return f"kernel.yama.ptrace_scope is 2: only a process with CAP_SYS_PTRACE may attach; {PTRACE_FIX}"
    return None


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
        raise AttachError(f"cannot read /proc/{pid}/maps ({exc.strerror}): not allowed to inspect PID {pid}; "
                          f"{PTRACE_FIX}", ExitCode.PERMISSION) from None
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


# --- choosing how to get in ------------------------------------------------------------------------------


def find_debugger(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The debugger's executable: PATH, then (cuda-gdb) $CUDA_HOME/bin, /usr/local/cuda/bin, /usr/local/cuda-*/bin."""
    env = os.environ if environ is None else environ
    found = shutil.which(name, path=env.get("PATH"))
    if found or name != "cuda-gdb":
        return found
    import glob

    versioned = sorted(glob.glob("/usr/local/cuda-*/bin/cuda-gdb"), reverse=True)  # newest toolkit first
    for candidate in [os.path.join(r, "bin", "cuda-gdb") for r in (env.get("CUDA_HOME"), env.get("CUDA_PATH"),
                                                                  "/usr/local/cuda") if r] + versioned:
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def remote_exec_helper(target: Target) -> str | None:
    """An interpreter of the target's version to call ``sys.remote_exec`` from: the target's own executable
    when it is a python3.14+ binary, else this interpreter when it has the same version."""
    if target.python is None or target.python < (3, 14):
        return None
    if re.fullmatch(r"python\d+\.\d+t?", os.path.basename(target.exe)) and os.access(target.exe, os.X_OK):
        return target.exe
    if sys.version_info[:2] == target.python and hasattr(sys, "remote_exec"):
        return sys.executable
    return None


def choose_method(requested: str, version: tuple[int, int] | None, found: Mapping[str, str | None]) -> tuple[str, str]:
    """(method, executable) for ``requested`` (one of METHODS); AttachError when it cannot be used."""
    if requested not in METHODS:
        raise AttachError(f"unknown method {requested!r} (one of {', '.join(METHODS)})", ExitCode.USAGE)
    if requested == "remote-exec":
        if version is None or version < (3, 14):
            shown = "an unknown version" if version is None else f"Python {version[0]}.{version[1]}"
            raise AttachError(f"--method remote-exec needs a target on Python 3.14+ (sys.remote_exec); it runs {shown}",
                              ExitCode.UNSUPPORTED)
        if not found.get("remote-exec"):
            raise AttachError("--method remote-exec needs a Python 3.14 interpreter of the target's version "
                              "(the target's own executable is not one)", ExitCode.MISSING_TOOL)
    if requested != "auto":
        path = found.get(requested)
        if not path:
            raise AttachError(f"{requested} is not installed (or not on PATH): {_install_hint(requested)}",
                              ExitCode.MISSING_TOOL)
        return requested, path
    order = ("remote-exec", "gdb", "cuda-gdb", "lldb") if version is not None and version >= (3, 14) else DEBUGGERS
    for method in order:
        path = found.get(method)
        if path:
            return method, path
    raise AttachError("no debugger to attach with: install gdb (Debian/Ubuntu: apt-get install gdb; `make setup` "
                      "does it as root), or point --method at cuda-gdb or lldb", ExitCode.MISSING_TOOL)


def _install_hint(method: str) -> str:
    return {"gdb": "apt-get install gdb (or dnf install gdb)",
            "cuda-gdb": "it ships with the CUDA toolkit (/usr/local/cuda/bin/cuda-gdb)",
            "lldb": "apt-get install lldb"}.get(method, "see docs/attach.md")


# --- the fixed program and its placement in memory -------------------------------------------------------


def safe_path(path: str, what: str) -> str:
    if not _SAFE_PATH.fullmatch(path) or "/../" in path or path.endswith("/.."):
        raise AttachError(f"{what} {path!r} has characters attach does not pass to a process (use a plain absolute "
                          "path)", ExitCode.BAD_INPUT)
    return path


def fixed_program(boot_path: str, control_path: str) -> str:
    """The one statement the target runs: exec the installed bootstrap with the control file's path.

    Both paths are validated (plain absolute paths) and embedded with repr(); nothing else varies. Never
    raises inside the target (the pending call must return 0); names no variable in ``__main__``."""
    b = repr(safe_path(boot_path, "bootstrap path"))
    c = repr(safe_path(control_path, "control path"))
    return (
        "try:\n"
        f" __import__('builtins').exec(__import__('builtins').compile(__import__('io').open_code({b}).read(),{b},"
        f"'exec'),{{'__name__':'__dflash_diag_attach__','__file__':{b},'CONTROL':{c}}})\n"
        "except BaseException:\n"
        " pass\n"
    )


def page_words(program: str) -> list[tuple[int, int]]:
    """The NUL-terminated program as (offset, little-endian 64-bit word) pairs, for 8-byte pokes."""
    data = program.encode("ascii") + b"\0"
    data += b"\0" * (-len(data) % 8)
    if len(data) > PAGE_BYTES:
        raise AttachError(f"the bootstrap program is {len(data)} bytes, over one page: install paths too long",
                          ExitCode.BAD_INPUT)
    return [(i, int.from_bytes(data[i : i + 8], "little")) for i in range(0, len(data), 8)]


def lldb_commands(program: str) -> list[str]:
    """The lldb batch commands (no interactive driving: lldb has no nudge and no page reuse)."""
    cmds = ["expr -l c -- unsigned long $dd_page = (unsigned long)((void*(*)(void*, unsigned long, int, int, int, long))"
            "mmap)((void*)0, 4096, 3, 34, -1, 0)"]
    cmds += [f"expr -l c -- *(unsigned long long*)($dd_page + {off}) = {word}ULL" for off, word in page_words(program)]
    cmds.append("expr -l c -- (int)((int(*)(void*, void*))Py_AddPendingCall)((void*)&PyRun_SimpleString, (void*)$dd_page)")
    cmds.append("process detach")
    return cmds


def remote_exec_argv(helper: str, pid: int, script_path: str) -> list[str]:
    code = f"import sys; sys.remote_exec({int(pid)}, {safe_path(script_path, 'script path')!r})"
    return [helper, "-I", "-c", code]


def gdb_argv(gdb: str) -> list[str]:
    settings = ("set auto-solib-add off", "set auto-load off", "set debuginfod enabled off", "set pagination off",
                "set confirm off", "set width 0", "set height 0", "set print thread-events off",
                "set print inferior-events off", "set print frame-arguments none", "set print entry-values no")
    argv = [gdb, "-nx", "-nw", "-q"]
    for s in settings:
        argv += ["-iex", s]
    return argv


def parse_value(output: str) -> int | None:
    """The integer of the last ``$N = value`` line gdb printed (hex or decimal), None when there is none."""
    found = re.findall(r"^\$\d+ = (-?(?:0x[0-9a-fA-F]+|\d+))", output, re.M)
    if not found:
        return None
    text = found[-1]
    return int(text, 16) if text.lower().startswith(("0x", "-0x")) else int(text)


def main_thread_number(info_threads: str, pid: int) -> str | None:
    """gdb's number for the thread whose LWP is the PID (the main thread)."""
    for line in info_threads.splitlines():
        m = re.match(r"^\*?\s*(\d+)\s+(?:Thread 0x[0-9a-f]+ \(LWP (\d+)\)|process (\d+)|LWP (\d+))", line.strip())
        if m and int(m.group(2) or m.group(3) or m.group(4)) == pid:
            return m.group(1)
    return None


def backtrace_functions(bt: str, symbols: ProcessSymbols | None = None) -> list[str]:
    """Function names of a gdb backtrace; frames gdb could not name are named from ``symbols``."""
    out: list[str] = []
    for m in re.finditer(r"^#(\d+)\s+(?:(0x[0-9a-fA-F]+) in )?([A-Za-z_?][\w.@:?]*)", bt, re.M):
        name = m.group(3)
        if name == "??" and m.group(2) and symbols is not None:
            pc = int(m.group(2), 16) - (1 if m.group(1) != "0" else 0)  # a return address: look inside the call
            name = symbols.name_of(pc) or "??"
        out.append(name)
    return out


def should_nudge(orig_rax: int | None, rax: int | None, functions: Sequence[str], machine: str) -> bool:
    """Wake the main thread with EINTR only where Python itself handles it: a futex wait under a Python
    lock acquire (``join()``, ``Queue.get()``...), interrupted by our attach in a restartable state."""
    if machine not in ("x86_64", "AMD64") or orig_rax != _FUTEX_X86_64 or rax not in _RESTART_ERRNOS:
        return False
    return any(f in _LOCK_WAIT_FUNCS for f in functions[:16])


# --- the files that carry the request and the answer ------------------------------------------------------


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
    nonce: str = field(default_factory=lambda: secrets.token_hex(8))

    @property
    def control(self) -> Path:
        return self.directory / f".attach-{self.pid}.{self.nonce}.control"

    @property
    def result(self) -> Path:
        return self.directory / f".attach-{self.pid}.{self.nonce}.result"

    @property
    def script(self) -> Path:
        return self.directory / f".attach-{self.pid}.{self.nonce}.py"

    def paths(self) -> tuple[Path, ...]:
        c, r = str(self.control), str(self.result)
        return (self.control, Path(c + ".claimed"), self.result, Path(r + ".tmp"), self.script)


def write_private(path: Path, data: bytes) -> None:
    """Create ``path`` 0600 (O_EXCL|O_NOFOLLOW: never through a planted file), fully written or not at all."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    os.close(fd)


def control_document(req: Request, action: str, names: Sequence[str], board_dir: str | None, deadline_wall_s: float,
                     method: str, package_root: str, lease: Lease | None = None) -> dict[str, Any]:
    if action not in ACTIONS:
        raise AttachError(f"unknown action {action!r}", ExitCode.USAGE)
    unknown = sorted(set(names) - set(KNOWN_PROBES))
    if unknown:
        raise AttachError(f"unknown probes: {', '.join(unknown)} (known: {', '.join(KNOWN_PROBES)})", ExitCode.USAGE)
    return {
        "schema": SCHEMA, "action": action, "nonce": req.nonce, "pid": req.pid, "version": __version__,
        "package_root": package_root, "probes": sorted(set(names)), "board_dir": board_dir,
        "result_path": str(req.result), "deadline_wall_s": deadline_wall_s, "discover": True, "method": method,
        "attacher_pid": os.getpid(),
        "lease": None if lease is None else {"pid": lease.pid, "start_ticks": lease.start_ticks},
    }


def read_result(path: Path, nonce: str) -> dict[str, Any] | None:
    """The bootstrap's answer once it is there (private, ours, bounded, this nonce), else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise AttachError(f"cannot read the attach result {path}: {exc.strerror}", ExitCode.ATTACH_FAILED) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077 or st.st_size > 4 << 20:
            raise AttachError(f"the attach result {path} is not a private file of yours: refusing it", ExitCode.ATTACH_FAILED)
        data = os.read(fd, 4 << 20)
    finally:
        os.close(fd)
    try:
        value = json.loads(data)
    except ValueError:
        raise AttachError(f"the attach result {path} is not JSON", ExitCode.ATTACH_FAILED) from None
    if not isinstance(value, dict) or value.get("schema") != SCHEMA or value.get("nonce") != nonce:
        raise AttachError(f"the attach result {path} is not the answer to this request", ExitCode.ATTACH_FAILED)
    return value


def remove_quietly(paths: Sequence[Path]) -> None:
    for p in paths:
        with contextlib.suppress(OSError):
            os.unlink(p)


_OWN_FILE = re.compile(r"\.attach-(\d+)\.(?:[0-9a-f]{16}\.(?:control(?:\.claimed)?|result(?:\.tmp)?|py)|page)")


def clean_stale(directory: Path, max_age_s: float = 600.0) -> None:
    """Remove request files this command left behind (a killed attach): only our own names, only old ones."""
    now = time.time()
    with contextlib.suppress(OSError):
        for entry in os.scandir(directory):
            if not _OWN_FILE.fullmatch(entry.name):
                continue
            with contextlib.suppress(OSError):
                st = entry.stat(follow_symlinks=False)
                pid = int(_OWN_FILE.fullmatch(entry.name).group(1))  # type: ignore[union-attr]
                if now - st.st_mtime > max_age_s or proc_state(pid) in (None, "Z", "X"):
                    os.unlink(entry.path)


# --- the debugger's life is bound to ours ---------------------------------------------------------------


def die_with_us() -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child receive SIGTERM when this process dies, even by SIGKILL
    (PR_SET_PDEATHSIG): gdb answers it by detaching and quitting. None where prctl cannot be called.

    The kernel sends it when the *thread* that started the child exits: the commands start it from the main
    thread and wait for it there."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def arm() -> None:
        prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:  # we died between the fork and the prctl: the signal will never come
            os._exit(1)

    return arm


# --- driving gdb ---------------------------------------------------------------------------------------


class DebuggerDied(Exception):
    pass


class DebuggerTimeout(Exception):
    pass


class GdbSession:
    """gdb (or cuda-gdb) read one command at a time from a pipe; each answer ends at an echoed marker."""

    def __init__(self, argv: Sequence[str], transcript: list[str], deadline_mono: float = float("inf")) -> None:
        env = dict(os.environ, LC_ALL="C", LANG="C", TERM="dumb", DEBUGINFOD_URLS="")
        self.proc = subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, start_new_session=True, env=env,
                                     preexec_fn=die_with_us())
        self.transcript = transcript
        self.deadline_mono = deadline_mono  # no command waits past it (the command's --timeout)
        self._n = 0
        self._tag = secrets.token_hex(4)
        self._buf = b""
        self.in_call = False
        self.marker = ""

    def command(self, cmd: str, timeout_s: float, *, call: bool = False) -> str:
        """Send ``cmd``; its output. Waits at most ``timeout_s``, and never past the deadline."""
        left_s = self.deadline_mono - time.monotonic()
        if left_s <= 0:
            raise DebuggerTimeout("the --timeout ran out")
        cut = left_s < timeout_s
        timeout_s = min(timeout_s, left_s)
        self._n += 1
        marker = self.marker = f"@@dflash-diag-{self._tag}-{self._n}@@"
        t0 = time.monotonic()
        self.in_call = call
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(f"{cmd}\necho \\n{marker}\\n\n".encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise DebuggerDied(self._last_words()) from None
        try:
            out = self._read_until(marker.encode(), timeout_s)
        except DebuggerTimeout:
            if cut:
                raise DebuggerTimeout(f"{cmd.split()[0]}: the --timeout ran out") from None
            raise
        self.in_call = False
        # Prompts ("(gdb) ", "(cuda-gdb) ") precede the answers when stdin is a pipe: drop them.
        text = re.sub(r"^(?:\([\w-]*gdb\) ?)+", "", out.decode("utf-8", "replace"), flags=re.M)
        self.transcript.append(f"> {cmd}   [{1e3 * (time.monotonic() - t0):.0f} ms]")
        self.transcript.append(text.rstrip())
        return text

    def _read_until(self, marker: bytes, timeout_s: float) -> bytes:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        while marker not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise DebuggerTimeout(f"no answer in {timeout_s:g} s")
            ready, _, _ = select.select([fd], [], [], min(left, 0.5))
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                raise DebuggerDied(self._last_words())
            self._buf += chunk
        out, _, self._buf = self._buf.partition(marker)
        return out

    def _last_words(self) -> str:
        """What the debugger said last before it went away (e.g. a missing shared library of cuda-gdb)."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=1.0)
        if self.proc.stdout is not None:  # what it printed but we had not read yet (it died before a write)
            with contextlib.suppress(OSError, ValueError):
                fd = self.proc.stdout.fileno()
                while select.select([fd], [], [], 0.2)[0] and len(self._buf) < 1 << 20:
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        break
                    self._buf += chunk
        said = self._buf.decode("utf-8", "replace")
        self.transcript.append(said.rstrip())
        return f"status {self.proc.returncode}: {_last_line(said)}" if said.strip() else f"status {self.proc.returncode}"

    def finish(self, timeout_s: float = 10.0) -> None:
        """Detach and quit; a debugger that does not exit in time is killed (it is between commands).

        Idempotent: a finish cut short (Ctrl-C, SIGTERM while waiting for the exit) is finished again."""
        stdin = self.proc.stdin
        if stdin is not None and not stdin.closed:
            with contextlib.suppress(BrokenPipeError, OSError, ValueError):
                stdin.write(b"detach\nquit\n")
                stdin.close()
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10.0)
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()


def resume_if_stopped(pid: int, grace_s: float = 0.5) -> bool:
    """SIGCONT the process when a debugger left it stopped (state T); True when we had to."""
    deadline = time.monotonic() + grace_s
    while True:
        state = proc_state(pid)
        if state != "T":
            if state in ("t",) and time.monotonic() < deadline:
                time.sleep(0.02)  # the tracer is still going away
                continue
            return False
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGCONT)
        return True


# --- the whole injection ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """What one attach/detach/inventory did (``result`` is the bootstrap's own answer)."""

    pid: int
    action: str
    method: str
    debugger: str | None
    python: str
    stopped_s: float | None  # how long the debugger held the process stopped
    waited_s: float  # from queueing the call to the answer
    total_s: float
    nudged: bool
    result: Mapping[str, Any]
    transcript: tuple[str, ...] = ()


@dataclass
class _Run:
    target: Target
    req: Request
    method: str
    path: str
    timeout_s: float
    deadline_mono: float = float("inf")
    transcript: list[str] = field(default_factory=list)
    stopped_s: float | None = None
    nudged: bool = False
    python_version: str | None = None
    main_thread_where: str | None = None


def package_paths() -> tuple[str, str]:
    """(package root, bootstrap file) of the installed probes package this command injects.

    Found with ``find_spec`` and its version read from the source: this command never imports the probes."""
    import importlib.util

    spec = importlib.util.find_spec("probes")
    if spec is None or not spec.origin or not spec.submodule_search_locations:
        raise AttachError("the probes package is not installed next to dflash-diag: reinstall it", ExitCode.FAILURE)
    pkg = Path(spec.origin).resolve().parent
    boot = pkg / "_attach_boot.py"
    if not boot.is_file():
        raise AttachError(f"probe bootstrap missing at {boot}: reinstall dflash-diag", ExitCode.FAILURE)
    m = re.search(r'^__version__ = "([^"]+)"', Path(spec.origin).read_text(encoding="utf-8"), re.M)
    declared = m.group(1) if m else None
    if declared != __version__:
        raise AttachError(f"the probes package ({declared}) and dflash-diag ({__version__}) differ: reinstall",
                          ExitCode.FAILURE)
    return str(pkg.parent), str(boot)


def inject(pid: int, action: str, *, names: Sequence[str] = (), board_dir: Path, method: str = "auto",
           timeout_s: float = DEFAULT_TIMEOUT_S, progress: Callable[[str], None] | None = None,
           environ: Mapping[str, str] | None = None, transcript: list[str] | None = None,
           lease: Lease | None = None) -> Outcome:
    """Run ``action`` inside ``pid`` and return its answer; AttachError (one line, exit code) otherwise.

    ``transcript`` (optional) receives the debugger session as it goes, also when the injection fails.
    ``lease``: see :class:`Lease`. Nothing waits past ``timeout_s`` but the graces of the module docstring."""
    t0 = time.monotonic()
    say = progress or (lambda _msg: None)
    target = preflight(pid)
    found: dict[str, str | None] = {name: find_debugger(name, environ) for name in DEBUGGERS}
    found["remote-exec"] = remote_exec_helper(target)
    chosen, path = choose_method(method, target.python, found)
    package_root, boot = package_paths()
    clean_stale(board_dir)
    run = _Run(target=target, req=Request(board_dir, pid), method=chosen, path=path, timeout_s=timeout_s,
               deadline_mono=t0 + timeout_s, transcript=transcript if transcript is not None else [])
    deadline_wall_s = time.time() + timeout_s - (time.monotonic() - t0)
    doc = control_document(run.req, action, names, str(board_dir), deadline_wall_s, chosen, package_root, lease)
    program = fixed_program(boot, str(run.req.control))
    try:
        write_private(run.req.control, json.dumps(doc).encode())
        say(f"{chosen}: attaching to PID {pid}")
        if chosen in ("gdb", "cuda-gdb"):
            _via_gdb(run, program)
        elif chosen == "lldb":
            _via_lldb(run, program)
        else:
            write_private(run.req.script, program.encode())
            _via_remote_exec(run)
        queued_at = time.monotonic()
        say("waiting for the process to reach a safe point")
        result = _wait_for_result(run)
    finally:
        remove_quietly(run.req.paths())
    python = run.python_version or target.version or str(result.get("python") or target.python_label)
    return Outcome(pid=pid, action=action, method=chosen, debugger=path if chosen != "remote-exec" else None,
                   python=python, stopped_s=run.stopped_s, waited_s=time.monotonic() - queued_at,
                   total_s=time.monotonic() - t0, nudged=run.nudged, result=result,
                   transcript=tuple(run.transcript))


def _left_s(run: _Run) -> float:
    """What the --timeout leaves (at least FINISH_S: enough for a debugger to detach and quit)."""
    return max(FINISH_S, run.deadline_mono - time.monotonic())


def _via_gdb(run: _Run, program: str) -> None:
    pid = run.target.pid
    session = GdbSession(gdb_argv(run.path), run.transcript, run.deadline_mono)
    attached_at: float | None = None
    try:
        session.command("show version", run.timeout_s)  # every command is cut at the deadline
        attached_at = time.monotonic()
        out = session.command(f"attach {pid}", run.timeout_s)
        _check_attached(pid, out, run.path)
        for setting in ("set scheduler-locking off", "set unwindonsignal on"):
            session.command(setting, 10.0)
        # libc's unwind tables, to read the main thread's stack through its syscall wrappers (small, fast).
        for lib in ("/libc[.-]", "/ld-musl"):
            session.command(f"sharedlibrary {lib}", run.timeout_s)
        addresses = run.target.symbols.addresses if run.target.symbols is not None else _ask_symbols(run, session)
        addr = _map_page(run, session, addresses["mmap"])
        _write_page(session, addr, program)
        out = session.command(f"p (int)((int(*)(void*, void*)){addresses['Py_AddPendingCall']:#x})"
                              f"((void*){addresses['PyRun_SimpleString']:#x}, (void*){addr:#x})", 10.0, call=True)
        if parse_value(out) != 0:
            raise AttachError(f"Py_AddPendingCall refused the call in PID {pid} ({_last_line(out)}): its queue is "
                              "full; try again in a moment", ExitCode.ATTACH_FAILED)
        _note_page(run, addr)
        _maybe_nudge(run, session)
        session.command("detach", 10.0)
        run.stopped_s = time.monotonic() - attached_at
        session.finish(min(10.0, _left_s(run)))
        resume_if_stopped(pid)  # a debugger that left it stopped (it should not): resume it
    except DebuggerTimeout as exc:
        _abandon(run, session, attached_at, f"{os.path.basename(run.path)} did not answer ({exc})")
    except DebuggerDied as exc:
        _abandon(run, session, attached_at, f"{os.path.basename(run.path)} exited during the attach ({exc})")
    except BaseException:  # an AttachError, or Ctrl-C / SIGTERM / SIGHUP (cli/_signals.py): detach, then go
        if session.proc.poll() is None:  # it reads "detach" once a call in flight has returned: wait for that
            session.finish(CALL_GRACE_S if session.in_call else min(10.0, _left_s(run)))
        if attached_at is not None:
            run.stopped_s = time.monotonic() - attached_at
        resume_if_stopped(pid)
        raise


def _abandon(run: _Run, session: GdbSession, attached_at: float | None, why: str) -> None:
    if session.in_call:
        # A call into the process is in flight: killing the debugger now would leave the thread to return
        # into a breakpoint. Give it one more generous chance before giving up.
        with contextlib.suppress(DebuggerTimeout, DebuggerDied):
            session._read_until(session.marker.encode(), CALL_GRACE_S)
    session.finish(FINISH_S)  # between commands now: detach and quit if it still reads, else killed
    resumed = resume_if_stopped(run.target.pid)
    if attached_at is not None:
        run.stopped_s = time.monotonic() - attached_at
    tail = " (it was left stopped: sent SIGCONT)" if resumed else ""
    raise AttachError(f"{why}; PID {run.target.pid} runs on unchanged{tail}: nothing was injected",
                      ExitCode.ATTACH_FAILED)


def _check_attached(pid: int, out: str, debugger: str) -> None:
    low = out.lower()
    if "ptrace: operation not permitted" in low or ("could not attach" in low and "permitted" in low):
        scope = ptrace_scope()
        note = f" (kernel.yama.ptrace_scope is {scope})" if scope else ""
        raise AttachError(f"not allowed to attach to PID {pid}{note}: {PTRACE_FIX}", ExitCode.PERMISSION)
    if "no such process" in low:
        raise AttachError(f"no process with PID {pid} is running", ExitCode.NO_PROCESS)
    if f"attaching to process {pid}" not in low or "ptrace:" in low:
        raise AttachError(f"{os.path.basename(debugger)} could not attach to PID {pid}: {_last_line(out)}",
                          ExitCode.ATTACH_FAILED)


def _last_line(out: str) -> str:
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    return lines[-1][:200] if lines else "no output"


def _ask_symbols(run: _Run, session: GdbSession) -> dict[str, int]:
    """The debugger's view of the runtime's symbols, when reading the ELF files did not work."""
    pid = run.target.pid
    session.command("sharedlibrary /libpython3", 30.0)
    hexversion = parse_value(session.command("p/x *(unsigned int*)&Py_Version", 10.0))
    if hexversion is None:
        raise AttachError(f"PID {pid} exports no Py_Version: not CPython 3.11+ (or a stripped interpreter); attach "
                          "supports CPython 3.11 to 3.14", ExitCode.UNSUPPORTED if run.target.python else ExitCode.NOT_PYTHON)
    major, minor, micro = hexversion >> 24, (hexversion >> 16) & 0xFF, (hexversion >> 8) & 0xFF
    check_version(pid, (major, minor))
    run.python_version = f"{major}.{minor}.{micro}"
    out: dict[str, int] = {}
    for symbol in ("Py_AddPendingCall", "PyRun_SimpleString", "mmap"):
        value = parse_value(session.command(f"p/x (unsigned long)&{symbol}", 10.0))
        if value is None:
            raise AttachError(f"{symbol} is not visible in PID {pid}: cannot inject (static or stripped libc?)",
                              ExitCode.UNSUPPORTED)
        out[symbol] = value
    return out


def _page_state_path(run: _Run) -> Path:
    return run.req.directory / f".attach-{run.target.pid}.page"


def _reusable_page(run: _Run) -> int | None:
    """The page an earlier, completed injection mapped, when it is still there exactly as we left it."""
    try:
        state = json.loads(_page_state_path(run).read_bytes()[:4096])
        addr = int(state["addr"])
        if int(state["start_ticks"]) != run.target.start_ticks or not state.get("done"):
            return None
        maps = _read_text(f"/proc/{run.target.pid}/maps", 16 << 20)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    pattern = rf"^{addr:x}-{addr + PAGE_BYTES:x} rw-p 00000000 00:00 0\s*$"
    return addr if re.search(pattern, maps, re.M) else None


def _map_page(run: _Run, session: GdbSession, mmap_addr: int) -> int:
    addr = _reusable_page(run)
    if addr is not None:
        return addr
    # PROT_READ|PROT_WRITE (3), MAP_PRIVATE|MAP_ANONYMOUS (0x22): one private page, never executable.
    out = session.command(f"p/x (unsigned long)((void*(*)(void*, unsigned long, int, int, int, long)){mmap_addr:#x})"
                          "((void*)0, 4096, 3, 34, -1, 0)", 10.0, call=True)
    addr = parse_value(out)
    if addr is None or addr in (0, (1 << 64) - 1) or addr % PAGE_BYTES:
        raise AttachError(f"mmap in PID {run.target.pid} failed ({_last_line(out)})", ExitCode.ATTACH_FAILED)
    return addr


def _write_page(session: GdbSession, addr: int, program: str) -> None:
    words = page_words(program)
    session.command("\n".join(f"set {{unsigned long long}}({addr:#x} + {off}) = {word:#x}" for off, word in words), 10.0)
    out = session.command(f"x/{len(words)}gx {addr:#x}", 10.0)
    if read_back_words(out)[: len(words)] != [w for _, w in words]:
        raise AttachError("writing the bootstrap program into the process did not read back the same: nothing queued",
                          ExitCode.ATTACH_FAILED)


def read_back_words(x_output: str) -> list[int]:
    """The values of gdb's ``x/Ngx`` output (``0xADDR:\t0x...\t0x...`` lines)."""
    return [int(v, 16) for line in x_output.splitlines() if re.match(r"^0x[0-9a-fA-F]+:", line.strip())
            for v in re.findall(r"0x[0-9a-fA-F]+", line.split(":", 1)[1])]


def _note_page(run: _Run, addr: int) -> None:
    path = _page_state_path(run)
    with contextlib.suppress(OSError):
        os.unlink(path)
    with contextlib.suppress(OSError):
        write_private(path, json.dumps({"addr": addr, "start_ticks": run.target.start_ticks, "done": False}).encode())


def _mark_page_done(run: _Run) -> None:
    path = _page_state_path(run)
    try:
        state = json.loads(path.read_bytes()[:4096])
        state["done"] = True
        os.unlink(path)
        write_private(path, json.dumps(state).encode())
    except (OSError, ValueError):
        pass


def _maybe_nudge(run: _Run, session: GdbSession) -> None:
    number = main_thread_number(session.command("info threads", 10.0), run.target.pid)
    if number is None:
        return
    session.command(f"thread {number}", 10.0)
    bt = session.command("bt 24", 10.0)
    functions = backtrace_functions(bt, run.target.symbols)
    run.main_thread_where = " < ".join(functions[:6]) or None
    if platform.machine() != "x86_64":
        return
    orig = parse_value(session.command("p $orig_rax", 10.0))
    rax = parse_value(session.command("p $rax", 10.0))
    if should_nudge(orig, rax, functions, platform.machine()):
        session.command("set var $rax = -4", 10.0)  # EINTR: the lock wait returns, Python runs pending calls
        run.nudged = True


def _via_lldb(run: _Run, program: str) -> None:
    argv = [run.path, "--batch", "--no-lldbinit", "-p", str(run.target.pid)]
    for cmd in lldb_commands(program):
        argv += ["-o", cmd]
    t = time.monotonic()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=_left_s(run), stdin=subprocess.DEVNULL,
                              start_new_session=True, check=False, preexec_fn=die_with_us())
        out = proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        out = str(exc.stdout or "")
        resume_if_stopped(run.target.pid)
        raise AttachError(f"lldb did not finish in {run.timeout_s:g} s; PID {run.target.pid} was resumed",
                          ExitCode.ATTACH_FAILED) from None
    finally:
        run.stopped_s = time.monotonic() - t
        resume_if_stopped(run.target.pid)  # lldb is known to leave processes stopped
    run.transcript.append(out)
    values = re.findall(r"\(int\) \$\d+ = (-?\d+)", out)
    if not values or values[-1] != "0":
        if "not permitted" in out.lower():
            raise AttachError(f"not allowed to attach to PID {run.target.pid}: {PTRACE_FIX}", ExitCode.PERMISSION)
        raise AttachError(f"lldb could not queue the bootstrap in PID {run.target.pid}: {_last_line(out)}",
                          ExitCode.ATTACH_FAILED)


def _via_remote_exec(run: _Run) -> None:
    argv = remote_exec_argv(run.path, run.target.pid, str(run.req.script))
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=min(60.0, _left_s(run)),
                              stdin=subprocess.DEVNULL, check=False, env={"PATH": os.environ.get("PATH", "")},
                              preexec_fn=die_with_us())
    except subprocess.TimeoutExpired:
        raise AttachError("sys.remote_exec did not return in time", ExitCode.ATTACH_FAILED) from None
    run.transcript.append(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        last = _last_line(proc.stderr or proc.stdout)
        code = ExitCode.PERMISSION if "permission" in last.lower() or "not permitted" in last.lower() else ExitCode.ATTACH_FAILED
        raise AttachError(f"sys.remote_exec into PID {run.target.pid} failed: {last}", code)


def _wait_for_result(run: _Run) -> dict[str, Any]:
    pid = run.target.pid
    req = run.req
    deadline = run.deadline_mono
    while True:
        result = read_result(req.result, req.nonce)
        if result is not None:
            _mark_page_done(run)
            return result
        if proc_state(pid) in (None, "Z", "X"):
            raise AttachError(f"PID {pid} exited before the probes started", ExitCode.NO_PROCESS)
        if time.monotonic() >= deadline:
            break
        time.sleep(0.02)
    # Cancel first: if the control file is still there, the bootstrap has not claimed it and never will.
    try:
        os.unlink(req.control)
    except FileNotFoundError:
        claimed_grace = time.monotonic() + CLAIMED_GRACE_S  # claimed just now: it is running, give it a moment
        while time.monotonic() < claimed_grace:
            result = read_result(req.result, req.nonce)
            if result is not None:
                _mark_page_done(run)
                return result
            time.sleep(0.05)
        raise AttachError(f"the probes' bootstrap started in PID {pid} but gave no answer in {run.timeout_s + CLAIMED_GRACE_S:g} s; "
                          f"`dflash-diag board {pid}` shows whether the probes run", ExitCode.ATTACH_TIMEOUT) from None
    with contextlib.suppress(OSError):
        os.unlink(_page_state_path(run))  # the queued call still points at that page: never reuse it
    where = f" (main thread in {run.main_thread_where})" if run.main_thread_where else ""
    raise AttachError(
        f"PID {pid} did not reach a safe point in {run.timeout_s:g} s: its main thread ran no Python code{where}; "
        "the request is cancelled: nothing was started, and nothing will be when it runs Python again. Retry when "
        "it is busy in Python, or with a longer --timeout",
        ExitCode.ATTACH_TIMEOUT)
