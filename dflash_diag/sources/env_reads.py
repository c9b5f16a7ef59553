"""Which variables of a process's environment the code its threads run reads: a setting read where the time goes.

A library tuned by an environment variable (SymPy's ``SYMPY_CACHE_SIZE``, protobuf's
``PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION``, a math library's thread count) reads it once, often at import, and then
runs differently for the life of the process; no stack shows the variable. What can be seen from outside: the
variables the process has (``/proc/PID/environ``, and what it set since, from its memory:
``sources.live_environ``), and the source of the installed packages its samples run in. A variable whose name is a
string in a module beside the code where the time goes is a setting that code reads. Nothing here knows a library
or a variable: the name in the source is the link.

Bounded: at most :data:`MAX_DIRS` directories, :data:`MAX_FILES` ``.py`` files each, :data:`MAX_FILE_BYTES` a file,
:data:`MAX_TOTAL_BYTES` in all; names of process plumbing nobody tunes speed with are not looked for. Values are
shown only as a number or a word (``<set>`` otherwise: they may be secrets).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from dflash_diag.model.evidence import site_relative
from dflash_diag.model.sched import EnvRead
from dflash_diag.sources.live_environ import read_live_environ
from dflash_diag.sources.sched import started_environ

PROC = Path("/proc")
MAX_DIRS = 6
MAX_FILES = 300
MAX_FILE_BYTES = 1 << 20
MAX_TOTAL_BYTES = 24 << 20
MAX_READS = 12
MAX_ENVIRON_BYTES = 1 << 20
_NAME = re.compile(r"[A-Z][A-Z0-9_]{3,63}")
_SHOWN = re.compile(r"[A-Za-z0-9_.:+-]{1,32}")
_SECRET = re.compile(r"(TOKEN|SECRET|PASSW|KEY|CREDENTIAL|AUTH|COOKIE|SESSION)", re.IGNORECASE)
# Process plumbing: the shell's, the locale's, the interpreter's own search paths, the terminal's, the scheduler's.
_PLUMBING = re.compile(
    r"^(PATH|HOME|USER|LOGNAME|SHELL|PWD|OLDPWD|SHLVL|HOSTNAME|HOST|TERM|TERM_\w+|COLORTERM|LANG|LANGUAGE|LC_\w+|TZ|"
    r"TMPDIR|TEMP|TMP|DISPLAY|EDITOR|PAGER|MAIL|LS_COLORS|XDG_\w+|SSH_\w+|DBUS_\w+|VIRTUAL_ENV|CONDA_\w+|PYTHONPATH|"
    r"PYTHONHOME|PYTHONUNBUFFERED|PYTHONDONTWRITEBYTECODE|PYTHONIOENCODING|LD_LIBRARY_PATH|MANPATH|INFOPATH|"
    r"SLURM_\w+|PBS_\w+|KUBERNETES_\w+|DEBIAN_FRONTEND|_)$")


def process_environ(pid: int, *, proc_root: Path = PROC) -> dict[str, str]:
    """The process's environment now: what it was started with, and what it set or changed since (its memory)."""
    env = started_environ(pid, proc_root, max_bytes=MAX_ENVIRON_BYTES) or {}
    live = read_live_environ(pid, _wanted, proc_root=proc_root)
    env.update(live or {})
    return env


def env_reads(env: Mapping[str, str], dirs: Iterable[str]) -> tuple[EnvRead, ...]:
    """The variables of ``env`` whose names are a string in a ``.py`` module of ``dirs`` (absolute directories of
    installed packages), each with the first module found naming it."""
    names = {n: v for n, v in env.items() if _wanted(n)}
    if not names:
        return ()
    found: dict[str, EnvRead] = {}
    budget = MAX_TOTAL_BYTES
    for directory in list(dict.fromkeys(dirs))[:MAX_DIRS]:
        for path in _modules(directory):
            if budget <= 0 or len(found) >= MAX_READS:
                return tuple(found.values())
            text = _read(path)
            budget -= len(text)
            for name in names:
                if name not in found and (f'"{name}"' in text or f"'{name}'" in text):
                    found[name] = EnvRead(name=name, value=shown_value(name, names[name]), reader=_relative(path))
    return tuple(found.values())


def shown_value(name: str, value: str) -> str:
    """The value as shown in a report: a number or a word; "<set>" for anything else, or for a name that may hold a
    secret."""
    return value if _SHOWN.fullmatch(value) and not _SECRET.search(name) else "<set>"


def _wanted(name: str) -> bool:
    return bool(_NAME.fullmatch(name)) and not _PLUMBING.match(name)


def _modules(directory: str) -> list[str]:
    try:
        with os.scandir(directory) as it:
            out = sorted(e.path for e in it if e.name.endswith(".py") and e.is_file(follow_symlinks=False))
    except OSError:
        return []
    return out[:MAX_FILES]


def _read(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read(MAX_FILE_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return ""


def _relative(path: str) -> str:
    return site_relative(path) or path.rsplit("/", 1)[-1]
