"""Why py-spy cannot look at a process, from /proc: no such process, another user's (ptrace policy), not a
Python interpreter. Turns a failed py-spy run into an :class:`AttachError` that names the cause and the fix."""

from __future__ import annotations

import os

from dflash_diag.errors import AttachError, ExitCode
from dflash_diag.sources.procfs import process_alive
from dflash_diag.sources.ptrace_access import PTRACE_FIX, has_cap_sys_ptrace, scope_note

# "Failed to find python version" and friends happen on ~40% of attaches to a fresh interpreter and go away
# on retry; these markers mean "try again".
_TRANSIENT_MARKERS = (
    "Failed to find python version",
    "Failed to find a python interpreter",
    "failed to find _PyRuntime",
    "Failed to get interpreter",
    "Failed to copy PyCodeObject",
    "Failed to copy PyFrameObject",
    "Failed to read",
    "Failed to merge native and python frames",
    "Interrupted system call",
)
_PERMISSION_MARKERS = ("permission denied", "operation not permitted", "os error 1)", "os error 13)")

def looks_like_python(pid: int) -> bool | None:
    """Whether the process runs a Python interpreter: exe named python*, or libpython mapped. None: cannot tell."""
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        exe = ""
    if "python" in os.path.basename(exe).lower():
        return True
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if "libpython" in line or "/python3" in line:
                    return True
    except PermissionError:
        return None
    except OSError:
        return None if not exe else False
    return False


def exe_name(pid: int) -> str:
    try:
        return os.path.basename(os.readlink(f"/proc/{pid}/exe"))
    except OSError:
        try:
            with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as fh:
                return fh.read().strip()
        except OSError:
            return "?"


def attach_error(pid: int, stderr: str) -> AttachError:
    """Turn a failed py-spy run into an AttachError that names the cause and the fix."""
    first = first_error_line(stderr)
    if not process_alive(pid):
        return AttachError(f"no process with PID {pid} (it exited or never existed)", ExitCode.NO_PROCESS)
    if any(marker in stderr.lower() for marker in _PERMISSION_MARKERS) or other_user(pid):
        refused = refused_to_root(pid)
        if refused is not None:
            return AttachError(refused, ExitCode.PERMISSION)
        owner = _owner(pid)
        who = f" (owned by uid {owner}, you are uid {os.geteuid()})" if owner is not None and owner != os.geteuid() else ""
        return AttachError(f"not allowed to inspect PID {pid}{who}: {first}{scope_note()}; {PTRACE_FIX}",
                           ExitCode.PERMISSION)
    if looks_like_python(pid) is False:
        return AttachError(
            f"PID {pid} ({exe_name(pid)}) is not a Python process: py-spy found no interpreter in it",
            ExitCode.NOT_PYTHON,
        )
    return AttachError(f"py-spy could not read PID {pid}: {first}", ExitCode.FAILURE)


def refused_to_root(pid: int) -> str | None:
    """Why the kernel refuses root itself (``doctor 1`` in a container): we run as root with CAP_SYS_PTRACE and still
    cannot read /proc/PID/exe. Advice to run as root would be wrong; say what is: the process is protected, and what
    its name says of it. None when root is not what is refused (another user's py-spy, no CAP_SYS_PTRACE)."""
    if os.geteuid() != 0 or not _has_ptrace_cap():
        return None
    try:
        os.readlink(f"/proc/{pid}/exe")
        return None
    except PermissionError:
        pass
    except OSError:
        return None
    name = exe_name(pid)
    what = (f"PID {pid} ({name}) cannot be read even by root with CAP_SYS_PTRACE: the kernel protects it (it holds "
            "capabilities this process lacks, as a machine's or a sandbox's init does, or a security module guards it)")
    if "python" not in name.lower():
        what += (f"; and {name} does not look like a Python program: is PID {pid} the process you meant? "
                 "(`pgrep -af python` lists the Python processes)")
    return what


def _has_ptrace_cap() -> bool:
    try:
        return has_cap_sys_ptrace()
    except OSError:
        return False


def first_error_line(stderr: str) -> str:
    for line in stderr.splitlines():
        line = line.strip()
        if line.startswith("Error:"):
            return line[len("Error:") :].strip()
        if line.lower().startswith("permission denied"):
            return "permission denied"
    for line in stderr.splitlines():
        if line.strip():
            return line.strip()[:300]
    return "no output"


def _owner(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def other_user(pid: int) -> bool:
    """True when we cannot ptrace ``pid`` because it is another user's and we are not root."""
    if os.geteuid() == 0:
        return False
    owner = _owner(pid)
    return owner is not None and owner != os.geteuid()


def is_transient(stderr: str) -> bool:
    return any(marker in stderr for marker in _TRANSIENT_MARKERS)


def check(pid: int) -> None:
    """Raise the diagnosis when py-spy will not be able to read ``pid`` (without running py-spy)."""
    if not process_alive(pid):
        raise AttachError(f"no process with PID {pid} (it exited or never existed)", ExitCode.NO_PROCESS)
    if other_user(pid):
        raise attach_error(pid, "Permission denied")
    if looks_like_python(pid) is False:
        raise attach_error(pid, "")


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process we can see (/proc/*/stat field 4)."""
    out: dict[int, int] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="utf-8", errors="replace") as fh:
                rest = fh.read().rsplit(")", 1)[-1].split()
            out[int(name)] = int(rest[1])
        except (OSError, IndexError, ValueError):
            continue
    return out


def python_interpreter(pid: int) -> int | None:
    """``pid`` when it runs Python, else the first Python process among its descendants, breadth first: the
    interpreter behind a wrapper (a pyenv shim or ``bash -c`` that forks it; one that execs it keeps the PID and
    is Python once the exec is done). None while there is none (yet)."""
    if looks_like_python(pid) is not False:
        return pid if process_alive(pid) else None
    parents = _parents()
    children: dict[int, list[int]] = {}
    for child, parent in parents.items():
        children.setdefault(parent, []).append(child)
    queue = sorted(children.get(pid, ()))
    while queue:
        candidate = queue.pop(0)
        if looks_like_python(candidate) and process_alive(candidate):
            return candidate
        queue.extend(sorted(children.get(candidate, ())))
    return None
