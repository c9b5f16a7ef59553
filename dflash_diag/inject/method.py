"""Choosing how to get into a process: ``--method`` and what is installed.

``ptrace`` (this command's own injector, no debugger), the debuggers (gdb, cuda-gdb, lldb) and Python 3.14's
``sys.remote_exec``; ``auto`` picks the first that works here.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import sys
from collections.abc import Collection, Mapping

from dflash_diag.errors import AttachError, ExitCode
from dflash_diag.inject.preflight import Target

METHODS = ("auto", "ptrace", "remote-exec", "gdb", "cuda-gdb", "lldb")
DEBUGGERS = ("gdb", "cuda-gdb", "lldb")


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


def ptrace_helper() -> str | None:
    """The interpreter that runs the ptrace driver, where the driver works (Linux x86-64); None elsewhere."""
    if sys.platform.startswith("linux") and platform.machine() == "x86_64":
        return sys.executable
    return None


def ptrace_unsupported() -> str:
    return f"the ptrace injector drives Linux x86-64 only; this is {sys.platform} {platform.machine()}"


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


def choose_method(requested: str, version: tuple[int, int] | None, found: Mapping[str, str | None],
                  skip: Collection[str] = ()) -> tuple[str, str]:
    """(method, executable) for ``requested`` (one of METHODS); AttachError when it cannot be used.

    ``auto``: ptrace where it works (no debugger, a pause of about a millisecond), then sys.remote_exec on
    3.14+, then the debuggers; ``skip``: methods already found unusable for this process."""
    if requested not in METHODS:
        raise AttachError(f"unknown method {requested!r} (one of {', '.join(METHODS)})", ExitCode.USAGE)
    if requested == "ptrace" and not found.get("ptrace"):
        raise AttachError(f"--method ptrace: {ptrace_unsupported()}; use gdb, cuda-gdb or lldb",
                          ExitCode.UNSUPPORTED)
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
    newer = version is not None and version >= (3, 14)
    order = ("ptrace", "remote-exec", *DEBUGGERS) if newer else ("ptrace", *DEBUGGERS)
    for method in order:
        path = found.get(method)
        if path and method not in skip:
            return method, path
    ptrace_note = f"{ptrace_unsupported()}, " if not found.get("ptrace") else "ptrace cannot be used for it, "
    raise AttachError(f"no debugger to attach with ({ptrace_note}and none is installed): install gdb "
                      "(Debian/Ubuntu: apt-get install gdb; `make setup` does it as root), or point --method at "
                      "cuda-gdb or lldb", ExitCode.MISSING_TOOL)


def _install_hint(method: str) -> str:
    return {"gdb": "apt-get install gdb (or dnf install gdb)",
            "cuda-gdb": "it ships with the CUDA toolkit (/usr/local/cuda/bin/cuda-gdb)",
            "lldb": "apt-get install lldb"}.get(method, "see docs/attach.md")

