"""Data lineage for training runs: which archive files a run touched, and how.

An inotify watch on the data directory feeds a small tracker thread.  'reads'
keeps exact read accounting (opens, reads, closes) for the audit trail;
'writes' only records files that land or change while the run is going.
"""
import ctypes
import os
import struct
import threading
from collections import Counter

IN_ACCESS, IN_MODIFY, IN_CLOSE_WRITE, IN_CLOSE_NOWRITE = 0x1, 0x2, 0x8, 0x10
IN_OPEN, IN_MOVED_TO, IN_CREATE = 0x20, 0x80, 0x100

MASKS = {
    "reads": IN_OPEN | IN_ACCESS | IN_CLOSE_NOWRITE,
    "writes": IN_CREATE | IN_MOVED_TO | IN_MODIFY | IN_CLOSE_WRITE,
}
_EVENT = struct.Struct("iIII")
_libc = ctypes.CDLL(None, use_errno=True)


class Tracker:
    def __init__(self, directory, level):
        self.directory = directory
        self.level = level
        self.counts = Counter()
        self.fd = _libc.inotify_init1(os.O_CLOEXEC)
        if self.fd < 0 or _libc.inotify_add_watch(self.fd, directory.encode(), MASKS[level]) < 0:
            raise OSError(ctypes.get_errno(), "inotify watch failed")
        self.thread = threading.Thread(target=self._run, name="lineage", daemon=True)
        self.thread.start()

    def _run(self):
        while True:
            try:
                buf = os.read(self.fd, 65536)
            except OSError:
                return
            off = 0
            while off < len(buf):
                _, mask, _, length = _EVENT.unpack_from(buf, off)
                name = buf[off + 16:off + 16 + length].rstrip(b"\0").decode()
                self.counts[(name, mask)] += 1
                off += 16 + length

    def close(self):
        os.close(self.fd)
