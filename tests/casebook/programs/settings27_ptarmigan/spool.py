"""Maildir-style record spool: a record is written under tmp/, renamed into new/ once complete, and
removed by the loader after it has been read. Directory attributes are set when the spool is made
(ext4 inode flags through FS_IOC_SETFLAGS, i.e. what chattr sets)."""
import fcntl
import os
import shutil
import struct
import sys
import tempfile
import time

FS_IOC_GETFLAGS = 0x80086601
FS_IOC_SETFLAGS = 0x40086602
FLAGS = {"noatime": 0x00000080, "dirsync": 0x00010000}
PREFIX = "ptarmigan-spool-"


def sweep_stale(root):
    for name in os.listdir(root):
        if name.startswith(PREFIX):
            owner = name[len(PREFIX):].split("-")[0]
            if owner.isdigit() and int(owner) != os.getpid() and not os.path.exists(f"/proc/{owner}"):
                shutil.rmtree(os.path.join(root, name), ignore_errors=True)


def set_dir_flags(path, names):
    want = 0
    for n in names:
        want |= FLAGS[n]
    if not want:
        return
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        cur = struct.unpack("l", fcntl.ioctl(fd, FS_IOC_GETFLAGS, struct.pack("l", 0)))[0]
        fcntl.ioctl(fd, FS_IOC_SETFLAGS, struct.pack("l", cur | want))
    except OSError as e:
        print(f"spool: cannot set {names} on {path} ({e})", file=sys.stderr)
    finally:
        os.close(fd)


class Spool:
    def __init__(self, root, attrs):
        if root == "tempdir":
            root = tempfile.gettempdir()
        sweep_stale(root)
        self.base = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=root)
        self.tmp = os.path.join(self.base, "tmp")
        self.new = os.path.join(self.base, "new")
        for d in (self.tmp, self.new):
            os.mkdir(d)
            set_dir_flags(d, attrs)
        fd = os.open(self.base, os.O_RDONLY | os.O_DIRECTORY)
        os.fsync(fd)                                  # the spool itself exists before any record does
        os.close(fd)
        self.closed = False

    def put(self, name, payload):
        if self.closed:
            raise SystemExit(0)                       # ends the capture thread at shutdown
        t = os.path.join(self.tmp, name)
        try:
            with open(t, "wb") as f:
                f.write(payload)
            final = os.path.join(self.new, name)
            os.rename(t, final)
        except FileNotFoundError:
            if self.closed:
                raise SystemExit(0) from None
            raise
        return final

    def take(self, path):
        if self.closed:
            raise SystemExit(0)                       # ends the loader thread at shutdown
        try:
            with open(path, "rb") as f:
                data = f.read()
            os.unlink(path)
        except FileNotFoundError:
            if self.closed:
                raise SystemExit(0) from None
            raise
        return data

    def remove(self):
        self.closed = True
        for _ in range(5):
            shutil.rmtree(self.base, ignore_errors=True)
            if not os.path.exists(self.base):
                return
            time.sleep(0.05)
