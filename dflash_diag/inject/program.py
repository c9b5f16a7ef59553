"""The fixed program an injection makes the process run, and how it sits in the one page it is written to.

One ``try`` statement that execs the installed ``probes/_attach_boot.py`` with the control file's path. Both paths
are checked to be plain absolute paths and embedded with ``repr``: nothing the user typed becomes code.
"""

from __future__ import annotations

import re

from dflash_diag.errors import AttachError, ExitCode

PAGE_BYTES = 4096
# Paths that may appear in the fixed program: absolute, plain characters (no quote, backslash, newline).
_SAFE_PATH = re.compile(r"/[A-Za-z0-9._/+@=-]{1,400}")


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

