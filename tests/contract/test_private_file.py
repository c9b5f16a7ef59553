"""The one private-file primitive (dflash_contract/private_file.py) that the board writer, the attach request, the
kernel recording and the bundle use: read only a private regular file of ours, bounded, never through a symlink or
into a FIFO; create 0600 with O_EXCL|O_NOFOLLOW, whole or not at all; replace atomically. The attach bootstrap's own
copy (it runs before anything of ours is importable) is held to the same flags and checks."""

from __future__ import annotations

import ast
import os
import stat
from pathlib import Path

import pytest

from dflash_contract import private_file
from dflash_contract.private_file import (
    NotPrivate,
    TooLarge,
    create_private,
    read_private,
    write_private_atomic,
)

ROOT = Path(__file__).resolve().parents[2]


def test_a_private_file_is_read_whole_and_bounded(tmp_path: Path) -> None:
    path = tmp_path / "f"
    assert read_private(path, 100) is None  # absent: nothing to read, not an error
    create_private(path, b"x" * 50)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_private(path, 50) == b"x" * 50
    with pytest.raises(TooLarge) as big:
        read_private(path, 49)
    assert big.value.size_bytes == 50


@pytest.mark.parametrize("kind", ["group-readable", "fifo", "directory"])
def test_what_is_not_a_private_regular_file_is_refused(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "f"
    if kind == "group-readable":
        path.write_bytes(b"{}")
        os.chmod(path, 0o640)
    elif kind == "fifo":
        os.mkfifo(path, 0o600)  # never blocks: opened non-blocking, refused as not a regular file
    else:
        path.mkdir(mode=0o700)
    with pytest.raises(NotPrivate):
        read_private(path, 100)


def test_never_through_a_symlink(tmp_path: Path) -> None:
    target = tmp_path / "target"
    create_private(target, b"secret")
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(OSError):
        read_private(link, 100)
    with pytest.raises(FileExistsError):
        create_private(link, b"planted")  # O_EXCL: not through what is there
    assert target.read_bytes() == b"secret"


def test_an_atomic_write_replaces_or_leaves_all_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "board.json"
    write_private_atomic(path, b"one")
    write_private_atomic(path, b"two")
    assert path.read_bytes() == b"two" and stat.S_IMODE(path.stat().st_mode) == 0o600
    planted = tmp_path / "board.json.tmp"
    planted.write_bytes(b"not ours")
    with pytest.raises(FileExistsError):
        write_private_atomic(path, b"three")
    assert path.read_bytes() == b"two" and planted.read_bytes() == b"not ours"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["board.json", "board.json.tmp"]


def _flag_names(node: ast.expr) -> set[str]:
    return {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute) and n.attr.startswith("O_")}


def _names_of(flags: int) -> set[str]:
    return {name for name in dir(os) if name.startswith("O_") and name in {
        "O_RDONLY", "O_WRONLY", "O_CREAT", "O_EXCL", "O_NOFOLLOW", "O_CLOEXEC", "O_NONBLOCK"}
        and getattr(os, name) and flags & getattr(os, name) == getattr(os, name)}


def test_the_attach_bootstraps_copy_keeps_the_same_rules() -> None:
    """probes/_attach_boot.py cannot import the helper (it runs before our packages are importable in the program):
    its opens use the helper's flags (a read: the helper's less O_NONBLOCK, which a control file needs not), its
    creates the helper's flags and mode, and it refuses a file that is not private by the same test."""
    source = (ROOT / "probes" / "_attach_boot.py").read_text()
    tree = ast.parse(source)
    opens = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr == "open" and isinstance(n.func.value, ast.Name) and n.func.value.id == "os"]
    assert opens, "the bootstrap opens no file: the test lost its subject"
    create, read = _names_of(private_file.CREATE_FLAGS), _names_of(private_file.READ_FLAGS) | {"O_RDONLY"}
    for call in opens:
        flags = _flag_names(call.args[1])
        if "O_CREAT" in flags:
            assert flags == create, flags
            assert isinstance(call.args[2], ast.Constant) and call.args[2].value == private_file.MODE
        else:
            assert flags <= read and {"O_NOFOLLOW", "O_CLOEXEC"} <= flags, flags
    assert f"st.st_mode & 0o{private_file.NOT_PRIVATE_BITS:03o}" in source and "st.st_uid != os.getuid()" in source
