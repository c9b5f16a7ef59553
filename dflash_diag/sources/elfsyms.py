"""Exported symbols of the ELF files a process has mapped, at their addresses in that process.

`dflash-diag attach` uses it to learn the target's exact CPython version (``Py_Version``, read from
/proc/<pid>/mem) *before* any debugger stops it, and to hand the debugger plain addresses
(``Py_AddPendingCall``, ``PyRun_SimpleString``, ``mmap``) so that it needs no symbol tables: a debugger
with ``auto-solib-add off`` attaches in a fraction of the time, and cuda-gdb never reads libcuda.

Only the dynamic symbol table (``.dynsym``) of 64-bit little-endian ELF files is read (x86-64, aarch64):
what the dynamic linker itself resolves, present in stripped binaries. Everything read is bounds-checked;
a file that does not parse is reported as ``ElfError``.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Iterable
from dataclasses import dataclass

ET_EXEC, ET_DYN = 2, 3
SHT_DYNSYM = 11
PT_LOAD = 1
STT_FUNC, STT_OBJECT = 2, 1
MAX_SYMBOLS = 200_000
PAGE = 4096


class ElfError(ValueError):
    pass


@dataclass(frozen=True)
class Mapping:
    start: int
    end: int
    perms: str
    offset: int
    path: str


def parse_maps(text: str) -> list[Mapping]:
    out: list[Mapping] = []
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 6 or not parts[5].startswith("/"):
            continue
        start, _, end = parts[0].partition("-")
        try:
            out.append(Mapping(int(start, 16), int(end, 16), parts[1], int(parts[2], 16), parts[5].strip()))
        except ValueError:
            continue
    return out


@dataclass(frozen=True)
class ElfSymbols:
    path: str
    kind: int  # ET_EXEC or ET_DYN
    first_load_vaddr: int
    first_load_offset: int
    symbols: dict[str, tuple[int, int, int]]  # name -> (value, size, type)

    def bias(self, maps: Iterable[Mapping]) -> int:
        """Where the file is loaded in the process (0 for a non-PIE executable)."""
        if self.kind == ET_EXEC:
            return 0
        page_offset = self.first_load_offset - self.first_load_offset % PAGE
        for m in maps:
            if m.path == self.path and m.offset == page_offset:
                return m.start - (self.first_load_vaddr - self.first_load_vaddr % PAGE)
        raise ElfError(f"{self.path} is not mapped in the process")


def read_dynsym(path: str, opened_as: str | None = None) -> ElfSymbols:
    """The ``.dynsym`` functions and objects of ``opened_as`` (default ``path``), named after ``path``."""
    try:
        with open(opened_as or path, "rb") as fh:
            return _parse(fh, path)
    except OSError as exc:
        raise ElfError(f"cannot read {path}: {exc.strerror}") from None
    except struct.error as exc:
        raise ElfError(f"{path}: truncated ELF ({exc})") from None


def _read_at(fh, offset: int, size: int) -> bytes:  # type: ignore[no-untyped-def]
    fh.seek(offset)
    data = fh.read(size)
    if len(data) != size:
        raise ElfError("truncated ELF file")
    return data


def _parse(fh, path: str) -> ElfSymbols:  # type: ignore[no-untyped-def]
    fh.seek(0)
    ident = fh.read(64)
    if ident[:4] != b"\x7fELF":
        raise ElfError(f"{path} is not an ELF file")
    if len(ident) < 64:
        raise ElfError(f"{path}: truncated ELF header")
    if ident[4] != 2 or ident[5] != 1:
        raise ElfError(f"{path} is not a 64-bit little-endian ELF file")
    e_type, = struct.unpack_from("<H", ident, 16)
    e_phoff, e_shoff = struct.unpack_from("<QQ", ident, 0x20)
    e_phentsize, e_phnum, e_shentsize, e_shnum = struct.unpack_from("<HHHH", ident, 0x36)
    if e_type not in (ET_EXEC, ET_DYN) or e_phentsize < 56 or e_shentsize < 64 or e_phnum > 4096 or e_shnum > 65535:
        raise ElfError(f"{path}: not an executable or shared object")
    load = None
    for i in range(e_phnum):
        p_type, _flags, p_offset, p_vaddr = struct.unpack("<IIQQ", _read_at(fh, e_phoff + i * e_phentsize, 24))
        if p_type == PT_LOAD:
            load = (p_offset, p_vaddr)
            break
    if load is None:
        raise ElfError(f"{path}: no loadable segment")
    sections = [struct.unpack("<IIQQQQIIQQ", _read_at(fh, e_shoff + i * e_shentsize, 64)) for i in range(e_shnum)]
    dynsym = next((s for s in sections if s[1] == SHT_DYNSYM), None)
    if dynsym is None:
        raise ElfError(f"{path}: no dynamic symbol table")
    _n, _t, _f, _a, sym_off, sym_size, link, _i, _al, entsize = dynsym
    if entsize != 24 or link >= len(sections) or sym_size // 24 > MAX_SYMBOLS:
        raise ElfError(f"{path}: unexpected dynamic symbol table")
    str_off, str_size = sections[link][4], sections[link][5]
    strtab = _read_at(fh, str_off, str_size)
    raw = _read_at(fh, sym_off, sym_size)
    symbols: dict[str, tuple[int, int, int]] = {}
    for k in range(sym_size // 24):
        st_name, st_info, _other, st_shndx, st_value, st_size = struct.unpack_from("<IBBHQQ", raw, k * 24)
        kind = st_info & 0xF
        if st_shndx == 0 or st_value == 0 or kind not in (STT_FUNC, STT_OBJECT) or st_name >= len(strtab):
            continue
        end = strtab.find(b"\0", st_name)
        name = strtab[st_name : end if end >= 0 else len(strtab)].decode("ascii", "replace")
        symbols.setdefault(name, (st_value, st_size, kind))
    return ElfSymbols(path=path, kind=e_type, first_load_vaddr=load[1], first_load_offset=load[0], symbols=symbols)


@dataclass(frozen=True)
class ProcessSymbols:
    """Addresses of the symbols attach needs, in one process."""

    python_file: str
    libc_file: str | None
    addresses: dict[str, int]  # symbol -> absolute address in the process
    functions: tuple[tuple[int, int, str], ...]  # (start, end, name) of the Python file's functions, sorted

    def name_of(self, address: int) -> str | None:
        """The exported Python-runtime function containing ``address`` (for reading a backtrace)."""
        lo, hi = 0, len(self.functions)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.functions[mid][0] <= address:
                lo = mid + 1
            else:
                hi = mid
        if lo and self.functions[lo - 1][0] <= address < self.functions[lo - 1][1]:
            return self.functions[lo - 1][2]
        return None


def _in_root(pid: int, path: str) -> str:
    """The file as the process sees it (its mount namespace), through /proc/<pid>/root."""
    return f"/proc/{pid}/root{path}"


def resolve(pid: int, maps_text: str, exe: str) -> ProcessSymbols:
    """Find the CPython runtime (libpython, else the executable) and libc in ``pid`` and their symbols."""
    maps = parse_maps(maps_text)
    paths = list(dict.fromkeys(m.path for m in maps))
    libpython = next((p for p in paths if re.search(r"/libpython\d+\.\d+t?\.so", p)), None)
    python_file = libpython or exe
    py = read_dynsym(python_file, _in_root(pid, python_file))
    if "Py_Version" not in py.symbols and libpython is None:
        raise ElfError(f"{python_file} exports no Py_Version: not CPython 3.11+")
    py_bias = py.bias(maps)
    addresses: dict[str, int] = {name: py_bias + py.symbols[name][0]
                 for name in ("Py_Version", "Py_AddPendingCall", "PyRun_SimpleString") if name in py.symbols}
    functions = tuple(sorted((py_bias + v, py_bias + v + max(1, s), n) for n, (v, s, k) in py.symbols.items()
                             if k == STT_FUNC))
    libc = next((p for p in paths if re.search(r"/(libc\.so\.\d+|libc-[\d.]+\.so|ld-musl-[\w-]+\.so\.\d+)$", p)), None)
    if libc is not None:
        lc = read_dynsym(libc, _in_root(pid, libc))
        for name in ("mmap", "mmap64"):
            if name in lc.symbols:
                addresses["mmap"] = lc.bias(maps) + lc.symbols[name][0]
                break
    elif "mmap" in py.symbols:  # a static executable
        addresses["mmap"] = py_bias + py.symbols["mmap"][0]
    return ProcessSymbols(python_file=python_file, libc_file=libc, addresses=addresses, functions=functions)


def read_version(pid: int, address: int) -> tuple[int, int, int, int]:
    """(major, minor, micro, releaselevel) from the process's ``Py_Version`` (PY_VERSION_HEX)."""
    try:
        with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
            mem.seek(address)
            data = mem.read(4)
    except OSError as exc:
        raise ElfError(f"cannot read the memory of PID {pid}: {exc.strerror}") from None
    if len(data) != 4:
        raise ElfError(f"cannot read Py_Version in PID {pid}")
    hexversion = int.from_bytes(data, "little")
    return hexversion >> 24, (hexversion >> 16) & 0xFF, (hexversion >> 8) & 0xFF, (hexversion >> 4) & 0xF


def is_readable(pid: int) -> bool:
    return os.access(f"/proc/{pid}/mem", os.R_OK)
