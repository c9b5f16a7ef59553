"""The environment a process set itself, read from outside (sources/live_environ.py): a real process that sets
variables in ``os.environ`` after its start has them in its memory and not in /proc/PID/environ; the reader finds
them, keeps only the names asked for, skips an entry over its bound, and answers None (never raises) where the
memory or libc cannot be read."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from dflash_diag.sources import live_environ
from dflash_diag.sources.elfsyms import ElfError, parse_maps, read_dynsym
from dflash_diag.sources.live_environ import MAX_STRING_BYTES, libc_mapping, read_live_environ

SCRIPT = (
    "import os, sys, time\n"
    "os.environ['MKL_CBWR'] = 'COMPATIBLE'\n"
    "os.environ['OMP_NUM_THREADS'] = '3'\n"
    f"os.environ['KMP_AFFINITY'] = 'x' * {MAX_STRING_BYTES + 10}\n"
    "os.environ['HF_TOKEN'] = 'hf_notforyou'\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
)


@pytest.fixture
def program() -> Iterator[subprocess.Popen[str]]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin"), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_the_variables_a_program_set_itself_are_read_from_its_memory(program: subprocess.Popen[str]) -> None:
    started = Path(f"/proc/{program.pid}/environ").read_bytes()
    assert b"MKL_CBWR" not in started and b"OMP_NUM_THREADS=1" in started  # /proc has the start only

    env = read_live_environ(program.pid, lambda name: name.startswith(("MKL_", "OMP_", "KMP_")))
    assert env == {"MKL_CBWR": "COMPATIBLE", "OMP_NUM_THREADS": "3"}  # KMP_AFFINITY: over the bound, skipped

    everything = read_live_environ(program.pid, lambda name: True)
    assert everything is not None and everything["HF_TOKEN"] == "hf_notforyou" and "PATH" in everything
    assert program.poll() is None  # read without stopping it


def _copy_relocating_pythons() -> list[str]:
    """Interpreters here whose executable defines ``environ`` itself (a copy relocation: libpython linked into the
    executable, as Debian's and Ubuntu's /usr/bin/python3 are): there libc's own symbol is not the live one."""
    out = []
    for path in ("/usr/bin/python3", "/usr/local/bin/python3", sys.executable):
        real = os.path.realpath(path)
        if not os.path.exists(real) or real in out:
            continue
        try:
            symbols = read_dynsym(real)
        except ElfError:
            continue
        if any(n in symbols.symbols for n in ("environ", "__environ")):
            out.append(real)
    return out


@pytest.mark.parametrize("python", _copy_relocating_pythons() or
                         [pytest.param("", marks=pytest.mark.skip(reason="no interpreter here defines environ "
                                                                         "in its executable"))])
def test_an_executable_that_holds_its_own_environ_is_read_there(python: str) -> None:
    """Debian's /usr/bin/python3: libc's ``__environ`` still points at the start-up array, the live one is the
    executable's copy; the reader finds the variable the program set (it read nothing before the fix)."""
    proc = subprocess.Popen([python, "-c", SCRIPT], env={"PATH": os.environ.get("PATH", "/usr/bin")},
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        assert read_live_environ(proc.pid, lambda name: name == "MKL_CBWR") == {"MKL_CBWR": "COMPATIBLE"}
    finally:
        proc.kill()
        proc.wait()


def test_what_cannot_be_read_is_none(tmp_path: Path) -> None:
    assert read_live_environ(2**22 + 12345, lambda name: True) is None  # no such process
    fake = tmp_path / "77"
    fake.mkdir()
    (fake / "maps").write_text("7f0000000000-7f0000001000 r--p 00000000 fe:00 1 /lib/x86_64-linux-gnu/libc.so.6\n")
    assert read_live_environ(77, lambda name: True, proc_root=tmp_path) is None  # no libc file under its root, no mem
    (fake / "maps").write_text("00400000-00401000 r-xp 00000000 fe:00 1 /usr/bin/static-program\n")
    assert read_live_environ(77, lambda name: True, proc_root=tmp_path) is None  # no libc mapped


def test_a_libc_that_does_not_parse_is_no_address(tmp_path: Path) -> None:
    fake = tmp_path / "78"
    (fake / "root" / "lib").mkdir(parents=True)
    (fake / "root" / "lib" / "libc.so.6").write_bytes(b"\x7fELF" + os.urandom(200))
    maps = parse_maps("7f0000000000-7f0000001000 r--p 00000000 fe:00 1 /lib/libc.so.6\n")
    assert live_environ.environ_address(78, maps, tmp_path) is None


@pytest.mark.parametrize(("maps", "found"), [
    ("7f1-7f2 r--p 00000000 fe:00 339380 /usr/lib/x86_64-linux-gnu/libc.so.6\n", "/usr/lib/x86_64-linux-gnu/libc.so.6"),
    ("7f2-7f3 r-xp 00026000 fe:00 3 /lib/libc-2.31.so\n", "/lib/libc-2.31.so"),
    ("7f1-7f2 r--p 00000000 fe:00 3 /lib/ld-musl-x86_64.so.1\n", "/lib/ld-musl-x86_64.so.1"),
    ("7f1-7f2 r--p 00000000 fe:00 3 /usr/lib/libcrypto.so.3\n7f3-7f4 rw-p 00000000 00:00 0 [heap]\n", None),
    ("garbage\n\nzz-yy r--p nothex fe:00 3 /lib/libc.so.6\n", None),
])
def test_libc_is_found_in_maps(maps: str, found: str | None) -> None:
    assert libc_mapping(parse_maps(maps)) == found
