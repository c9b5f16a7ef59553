"""What a thread blocked in a file system call works on, and the storage settings that make such calls wait.

A thread parked in ``rename``, ``openat``, ``fsync`` or ``write`` shows only the call in its stacks. Its target is
read from /proc when a sweep catches it there: ``task/TID/syscall`` gives the call's arguments; a descriptor's file
is its ``fd`` link, and a path argument is read from the process's memory (``/proc/PID/mem``: one read of at most
PATH_BYTES at the argument's address, no stop; a relative path is joined to the descriptor or the working directory
it is relative to). Then what the kernel does to calls on that file, away from its defaults:

- the directory's inode flags (``FS_IOC_GETFLAGS`` on a read-only descriptor of our own, opened without following a
  link and closed at once; what ``chattr`` sets): ``dirsync`` (every create, rename and unlink in it waits for the
  journal to commit), ``sync`` (every write to its files waits for the storage), data journaling;
- the mount's options (``/proc/PID/mountinfo``): ``sync``, ``dirsync``.

Nothing is written, nothing the program holds is touched. Each directory is read once per process (the answer is
kept, bounded). The reads need the permission ptrace needs, as ``syscall`` does; without it the target stays
unknown. Costs are measured by ``bench/sched_readers.py``.
"""

from __future__ import annotations

import fcntl
import os
import platform
import struct
from pathlib import Path

from dflash_diag.sources.procfs import syscall_names

PROC = Path("/proc")
PATH_BYTES = 4096  # PATH_MAX: a path argument longer than this is not a path
MAX_DIRECTORIES = 256  # directories whose settings are kept per reader
MAX_MOUNTINFO_BYTES = 1 << 20

# Calls that take a path: (the argument holding it, the directory descriptor it is relative to or None). For a rename
# the new name's: the directory the entry is made in.
_PATH_ARGS: dict[str, tuple[int, int | None]] = {
    "open": (0, None), "stat": (0, None), "lstat": (0, None), "access": (0, None), "rename": (1, None),
    "mkdir": (0, None), "unlink": (0, None), "openat": (1, 0), "mkdirat": (1, 0), "newfstatat": (1, 0),
    "unlinkat": (1, 0), "renameat": (3, 2), "renameat2": (3, 2), "faccessat": (1, 0), "faccessat2": (1, 0),
    "statx": (1, 0)}
# Calls on a descriptor (the first argument).
_FD_CALLS = frozenset({"read", "write", "pread64", "pwrite64", "readv", "writev", "pwritev", "pwritev2", "fsync",
                       "fdatasync", "ftruncate", "fallocate", "sync_file_range", "flock", "syncfs"})
AT_FDCWD = -100

# FS_IOC_GETFLAGS (_IOR('f', 1, long)) and the inode flags that make calls on the directory's files wait.
FS_IOC_GETFLAGS = 0x80086601
_INODE_FLAGS = (
    (0x00010000, "the dirsync attribute (chattr +D): every create, rename and unlink in it waits for the journal to "
                 "commit"),
    (0x00000008, "the sync attribute (chattr +S): every write to its files waits for the storage"),
    (0x00004000, "data journaling (chattr +j): its files' data is written twice, through the journal"),
)
# File systems whose calls go to a server or a user-space daemon.
_REMOTE_TYPES = ("nfs", "cifs", "smb", "fuse", "9p", "ceph", "lustre", "gpfs", "glusterfs", "afs", "sshfs", "virtiofs")
_MOUNT_OPTIONS = (
    ("dirsync", "its file system is mounted dirsync: every create, rename and unlink waits for the storage"),
    ("sync", "its file system is mounted sync: every write waits for the storage"),
)


def parse_syscall_args(text: str) -> tuple[int, tuple[int, ...]] | None:
    """(call number, its six arguments) from ``/proc/.../syscall`` ("82 0x7ffd... 0x... ... sp pc"); None where the
    thread runs or is not in a call."""
    parts = text.split()
    if len(parts) < 7 or not parts[0].isdigit():
        return None
    try:
        return int(parts[0]), tuple(int(p, 16) for p in parts[1:7])
    except ValueError:
        return None


def _signed(value: int) -> int:
    """A register's value as the C int the call takes (AT_FDCWD is -100)."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


class StorageReader:
    """The file a blocked thread of ``pid`` works on (:meth:`target`), and the storage settings of its directory
    (:meth:`settings`), kept per directory."""

    def __init__(self, pid: int, *, proc_root: Path = PROC, names: dict[int, str] | None = None) -> None:
        self.pid = pid
        self.proc_root = proc_root
        self.names = names if names is not None else syscall_names(platform.machine())
        self._settings: dict[str, tuple[str, ...]] = {}
        self._mounts: list[tuple[str, frozenset[str], str]] | None = None

    def target(self, text: str) -> str | None:
        """The absolute path of the file the call in ``text`` (a thread's ``syscall`` file) works on; None where it
        is not a file system call, or its argument cannot be read."""
        parsed = parse_syscall_args(text)
        if parsed is None:
            return None
        number, args = parsed
        name = self.names.get(number, "")
        if name in _FD_CALLS:
            return self._fd_path(_signed(args[0]))
        spec = _PATH_ARGS.get(name)
        if spec is None:
            return None
        path = self._string(args[spec[0]])
        if path is None or path.startswith("/"):
            return path
        base = self._fd_path(_signed(args[spec[1]])) if spec[1] is not None and _signed(args[spec[1]]) != AT_FDCWD \
            else self._link("cwd")
        return os.path.normpath(os.path.join(base, path)) if base else None

    def settings(self, path: str) -> tuple[str, ...]:
        """What the kernel does to calls on ``path``'s directory away from its defaults (its inode flags, its mount's
        options), read once per directory."""
        directory = os.path.dirname(path) or "/"
        if directory not in self._settings:
            if len(self._settings) >= MAX_DIRECTORIES:
                return ()
            mount = self._mount(directory)
            # A network or user-space file system's open can hang (a server gone): its flags are not asked.
            local = mount is not None and not mount[2].startswith(_REMOTE_TYPES)
            options = tuple(text for option, text in _MOUNT_OPTIONS if mount is not None and option in mount[1])[:1]
            self._settings[directory] = (self._flags(directory) if local else ()) + options
        return self._settings[directory]

    def _link(self, name: str) -> str | None:
        try:
            target = os.readlink(self.proc_root / str(self.pid) / name)
        except OSError:
            return None
        return target if target.startswith("/") else None

    def _fd_path(self, fd: int) -> str | None:
        """A descriptor's file: only a file on a disk (a pipe's or socket's link is not a path)."""
        if fd < 0:
            return None
        target = self._link(f"fd/{fd}")
        return target.removesuffix(" (deleted)") if target else None

    def _string(self, address: int) -> str | None:
        """The NUL-ended string at ``address`` in the process's memory; None where unreadable or not a path."""
        if address <= 0:
            return None
        try:
            fd = os.open(self.proc_root / str(self.pid) / "mem", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            raw = os.pread(fd, PATH_BYTES, address)
        except (OSError, OverflowError, ValueError):
            return None
        finally:
            os.close(fd)
        end = raw.find(b"\0")
        if end <= 0:
            return None
        text = raw[:end].decode("utf-8", "replace")
        return text if text.isprintable() else None

    def _flags(self, directory: str) -> tuple[str, ...]:
        """The directory's inode flags that make calls wait, through the process's root (its mount namespace)."""
        where = self.proc_root / str(self.pid) / "root" / directory.lstrip("/")
        try:
            fd = os.open(where, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return ()
        try:
            flags = struct.unpack("l", fcntl.ioctl(fd, FS_IOC_GETFLAGS, struct.pack("l", 0)))[0]
        except OSError:  # a file system without inode flags (tmpfs, overlay on some kernels)
            return ()
        finally:
            os.close(fd)
        return tuple(f"its directory has {text}" for bit, text in _INODE_FLAGS if flags & bit)

    def _mount(self, directory: str) -> tuple[str, frozenset[str], str] | None:
        """The mount ``directory`` is on (the longest mount point above it): its point, options and type."""
        if self._mounts is None:
            self._mounts = _parse_mountinfo(_read(self.proc_root / str(self.pid) / "mountinfo"))
        return max((m for m in self._mounts if directory == m[0] or directory.startswith(m[0].rstrip("/") + "/")),
                   key=lambda m: len(m[0]), default=None)


def _read(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(MAX_MOUNTINFO_BYTES).decode("utf-8", "replace")
    except OSError:
        return ""


def _parse_mountinfo(text: str) -> list[tuple[str, frozenset[str], str]]:
    """(mount point, its options and its file system's, the file system's type) per line of ``/proc/PID/mountinfo``
    ("36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue"). Octal escapes in the point
    are decoded."""
    out = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 10 or "-" not in fields[6:]:
            continue
        dash = fields.index("-", 6)
        if len(fields) < dash + 4:
            continue
        point = fields[4].encode().decode("unicode_escape", "replace") if "\\" in fields[4] else fields[4]
        options = frozenset(fields[5].split(",")) | frozenset(fields[dash + 3].split(","))
        out.append((point, options, fields[dash + 1]))
    return out
