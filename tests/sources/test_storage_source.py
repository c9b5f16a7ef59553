"""The file a blocked thread works on, and its directory's storage settings (``sources.storage``), read from a real
child: one blocked opening a FIFO (``openat``, its path argument read from the child's memory), one blocked reading
a descriptor, in a directory with the dirsync attribute where this file system keeps inode flags."""
from __future__ import annotations

import contextlib
import fcntl
import os
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dflash_diag.sources import procfs
from dflash_diag.sources.storage import StorageReader, _parse_mountinfo, parse_syscall_args

FS_IOC_SETFLAGS = 0x40086602
DIRSYNC = 0x00010000


def _set_dirsync(directory: Path) -> bool:
    """chattr +D on ``directory``; False where this file system keeps no such flag (tmpfs) or we may not."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.ioctl(fd, FS_IOC_SETFLAGS, struct.pack("l", DIRSYNC))
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


@contextlib.contextmanager
def _blocked_child(code: str, *args: str) -> Iterator[subprocess.Popen[bytes]]:
    child = subprocess.Popen([sys.executable, "-c", code, *args])
    try:
        yield child
    finally:
        child.kill()
        child.wait()


def _blocked_read(pid: int, storage: StorageReader, call: str) -> procfs.ProcThreadSample:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        sample = procfs.read_thread(pid, pid, storage=storage)
        if sample is not None and sample.syscall == call and sample.syscall_target:
            return sample
        time.sleep(0.05)
    raise AssertionError(f"the child was never seen blocked in {call} with its target read")


def test_a_thread_blocked_opening_a_file_is_read_with_its_path_and_its_directorys_dirsync(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    flagged = _set_dirsync(spool)
    os.mkfifo(spool / "rec.fifo")
    # A relative path, opened from the spool as working directory: joined to the child's cwd.
    with _blocked_child("import os, sys; os.chdir(sys.argv[1]); open('rec.fifo', 'rb')", str(spool)) as child:
        sample = _blocked_read(child.pid, StorageReader(child.pid), "openat")
    assert sample.syscall_target == str(spool / "rec.fifo")
    if not flagged:
        pytest.skip("this file system keeps no dirsync flag: the target was read, its settings cannot be set here")
    assert sample.target_settings == ("its directory has the dirsync attribute (chattr +D): every create, rename and "
                                      "unlink in it waits for the journal to commit",)


def test_a_descriptors_file_is_its_link_and_a_plain_directory_has_no_settings(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "feed.fifo")
    writer_code = "import os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR); time.sleep(60)"
    with _blocked_child(writer_code, str(tmp_path / "feed.fifo")):
        code = "import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.read(fd, 1)"
        with _blocked_child(code, str(tmp_path / "feed.fifo")) as child:
            sample = _blocked_read(child.pid, StorageReader(child.pid), "read")
    assert sample.syscall_target == str(tmp_path / "feed.fifo") and sample.target_settings == ()


def test_the_calls_arguments_and_the_mounts_options_parse() -> None:
    assert parse_syscall_args("82 0x7ffd1 0x7ffd2 0x0 0x0 0x0 0x0 0x7ffd0 0x7f00") == (
        82, (0x7ffd1, 0x7ffd2, 0, 0, 0, 0))
    assert parse_syscall_args("running") is None and parse_syscall_args("-1 0x0 0x0") is None
    mounts = _parse_mountinfo("36 35 98:0 / / rw,relatime - ext4 /dev/vda rw\n"
                              "40 36 98:1 / /mnt/sync\\040dir rw,sync,dirsync - ext4 /dev/vdb rw\n")
    assert mounts[0] == ("/", frozenset({"rw", "relatime"}), "ext4")
    assert mounts[1][0] == "/mnt/sync dir" and {"sync", "dirsync"} <= mounts[1][1]


def test_a_directory_on_a_mount_with_sync_says_so(tmp_path: Path) -> None:
    (tmp_path / "7").mkdir()
    (tmp_path / "7" / "mountinfo").write_text("36 35 98:0 / / rw,relatime - ext4 /dev/vda rw\n"
                                              "41 36 98:2 / /data rw,relatime,sync - ext4 /dev/vdc rw\n")
    reader = StorageReader(7, proc_root=tmp_path, names={})
    assert reader.settings("/data/shards/a.bin") == (
        "its file system is mounted sync: every write waits for the storage",)
    assert reader.settings("/datasets/a.bin") == ()  # on /, not /data
