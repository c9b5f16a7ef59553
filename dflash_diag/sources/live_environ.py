"""The environment a process has now, read from its memory: what ``/proc/PID/environ`` cannot show.

``/proc/PID/environ`` is the block the process was started with. A program that sets a variable itself, the common
way to tune a math library (``os.environ["MKL_CBWR"] = "COMPATIBLE"`` at the top of a script, before ``import
torch``), calls ``putenv``: libc copies its ``environ`` array to the heap and adds the entry there, and /proc never
shows it. Those variables are often the very settings a diagnosis needs, and the libraries read them at load time
from that array. So, from outside, with no probe and no stop:

1. libc's mapping in ``/proc/PID/maps`` (its file, and where its first segment is loaded);
2. the address of ``__environ`` in the dynamic symbol table of the executable (where a copy relocation put the
   variable) or else of libc (``sources.elfsyms``, which attach uses too; once per file);
3. through ``/proc/PID/mem``: the pointer it holds, the array of pointers it points at, and each string.

Reading ``/proc/PID/mem`` needs the permission ptrace needs (the same py-spy needs; no attach, the process runs on).
A static binary, a libc without ``__environ``, a process that is gone or a permission refused: ``None``, and the
caller keeps /proc's block.

The process is untrusted input and changes under the reader (another ``putenv`` may move the array mid-read): at
most :data:`MAX_ENTRIES` entries and :data:`MAX_STRING_BYTES` per string, reads that cross into an unmapped page
fail cleanly (a short result), and only the names the caller keeps are decoded. Cost: ``bench/sched_readers.py``.
"""

from __future__ import annotations

import functools
import os
import re
import struct
from collections.abc import Callable
from pathlib import Path

from dflash_diag.sources.elfsyms import ElfError, ElfSymbols, Mapping, parse_maps, read_dynsym

PROC = Path("/proc")
MAX_ENTRIES = 4096  # pointers read from the array
MAX_STRING_BYTES = 8192  # bytes read per entry (a longer one is skipped)
MAX_MAPS_BYTES = 8 * 1024 * 1024
PAGE_BYTES = 4096
_POINTER = struct.Struct("<Q")  # x86-64 and aarch64 Linux: 8-byte little-endian pointers
_LIBC = re.compile(r"/(libc\.so\.\d+|libc-[\d.]+\.so|ld-musl-[\w-]+\.so\.\d+)$")
_ENVIRON_SYMBOLS = ("__environ", "environ", "_environ")


def libc_mapping(maps: list[Mapping]) -> str | None:
    """The path of the libc a process maps (from its parsed ``maps``). Pure."""
    return next((m.path for m in maps if _LIBC.search(m.path)), None)


@functools.lru_cache(maxsize=8)
def _libc_symbols(opened_as: str, path: str, _identity: tuple[int, int, int]) -> ElfSymbols | None:
    """The exported symbols of libc (or of the executable); ``_identity`` (device, inode, mtime) keys the cache, so a replaced file is read
    again. None for a file that does not parse."""
    try:
        return read_dynsym(path, opened_as)
    except ElfError:
        return None


def environ_address(pid: int, maps: list[Mapping], proc_root: Path = PROC) -> int | None:
    """Where ``pid`` keeps the ``environ`` pointer libc reads and writes; None where no mapped file defines it.

    The executable's own definition comes first: an executable that refers to ``environ`` itself (a Python with
    libpython linked in, as Debian and Ubuntu build ``/usr/bin/python3``) gets its copy of the variable by a copy
    relocation, and every library, libc included, then uses that copy: libc's own symbol keeps pointing at a
    variable nobody updates (the start-up array, without what the program set)."""
    for path in _defining_files(pid, maps, proc_root):
        address = _symbol_address(pid, path, maps, proc_root)
        if address is not None:
            return address
    return None


def _defining_files(pid: int, maps: list[Mapping], proc_root: Path) -> list[str]:
    out: list[str] = []
    try:
        exe = os.readlink(proc_root / str(pid) / "exe")
    except OSError:
        exe = ""
    if exe and any(m.path == exe for m in maps):
        out.append(exe)
    libc = libc_mapping(maps)
    if libc is not None and libc not in out:
        out.append(libc)
    return out


def _symbol_address(pid: int, path: str, maps: list[Mapping], proc_root: Path) -> int | None:
    on_disk = proc_root / str(pid) / "root" / path.lstrip("/")
    try:
        st = os.stat(on_disk)
    except OSError:
        return None
    symbols = _libc_symbols(str(on_disk), path, (st.st_dev, st.st_ino, st.st_mtime_ns))
    if symbols is None:
        return None
    value = next((symbols.symbols[n][0] for n in _ENVIRON_SYMBOLS if n in symbols.symbols), None)
    if value is None:
        return None
    try:
        return symbols.bias(maps) + value
    except ElfError:
        return None


def _read(fd: int, address: int, size: int) -> bytes:
    """Up to ``size`` bytes at ``address``; short (or empty) where the memory is not mapped."""
    try:
        return os.pread(fd, size, address)
    except (OSError, OverflowError, ValueError):
        return b""


def _string(fd: int, address: int) -> bytes | None:
    """The NUL-terminated string at ``address``, read a page at a time; None when longer than the bound."""
    out = b""
    while len(out) < MAX_STRING_BYTES:
        chunk = _read(fd, address + len(out), PAGE_BYTES - (address + len(out)) % PAGE_BYTES)
        if not chunk:
            return None
        end = chunk.find(b"\0")
        if end >= 0:
            return out + chunk[:end] if len(out) + end <= MAX_STRING_BYTES else None
        out += chunk
    return None


def read_live_environ(pid: int, keep: Callable[[str], bool], *, proc_root: Path = PROC) -> dict[str, str] | None:
    """The variables of ``pid``'s environment now whose names ``keep`` accepts; None where it cannot be read."""
    base = proc_root / str(pid)
    try:
        with open(base / "maps", "rb") as fh:
            maps = parse_maps(fh.read(MAX_MAPS_BYTES).decode("utf-8", errors="replace"))
    except OSError:
        return None
    address = environ_address(pid, maps, proc_root)
    if address is None:
        return None
    try:
        fd = os.open(base / "mem", os.O_RDONLY)
    except OSError:
        return None
    try:
        return _entries(fd, address, keep)
    finally:
        os.close(fd)


def _entries(fd: int, symbol_address: int, keep: Callable[[str], bool]) -> dict[str, str] | None:
    raw = _read(fd, symbol_address, _POINTER.size)
    if len(raw) != _POINTER.size:
        return None
    array = _POINTER.unpack(raw)[0]
    if array == 0:
        return {}
    env: dict[str, str] = {}
    count = 0
    while count < MAX_ENTRIES:
        address = array + count * _POINTER.size
        # The array a page at a time, to the page's end: a read never spans into a page that may be unmapped.
        chunk = _read(fd, address, PAGE_BYTES - address % PAGE_BYTES)
        usable = len(chunk) - len(chunk) % _POINTER.size
        if usable == 0:
            return env if count else None
        for (pointer,) in _POINTER.iter_unpack(chunk[:usable]):
            if pointer == 0 or count >= MAX_ENTRIES:
                return env
            count += 1
            _add(env, _string(fd, pointer), keep)
    return env


def _add(env: dict[str, str], text: bytes | None, keep: Callable[[str], bool]) -> None:
    name, sep, value = (text or b"").partition(b"=")
    if not sep:
        return
    key = name.decode("utf-8", errors="replace")
    if keep(key):
        env[key] = value.decode("utf-8", errors="replace")
