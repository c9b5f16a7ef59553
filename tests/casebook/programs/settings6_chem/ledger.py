"""Sample ledger: one JSON line per training example served.

Audit asked for a record of exactly which compounds each model version saw.
The ledger is an append-only file; `sync` picks the durability:

  "dsync"  every record is on stable storage when write() returns (O_DSYNC),
           so a crashed run's ledger is complete up to the last example
  "none"   page cache only; fsync() at every checkpoint
"""
import json
import os
import threading

SYNC_FLAGS = {"dsync": os.O_DSYNC, "none": 0}


ROLL_BYTES = 64 << 20


class Ledger:
    def __init__(self, path, sync="dsync"):
        self.path = path
        self.sync = sync
        self.fd = self._open()
        self.count = 0
        self._lock = threading.Lock()

    def _open(self):
        return os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | SYNC_FLAGS[self.sync], 0o644)

    def record(self, **fields):
        line = (json.dumps(fields, separators=(",", ":")) + "\n").encode()
        with self._lock:
            os.write(self.fd, line)
            self.count += 1

    def checkpoint(self):
        with self._lock:
            os.fsync(self.fd)
            if os.fstat(self.fd).st_size > ROLL_BYTES:      # keep one previous segment
                os.close(self.fd)
                os.replace(self.path, self.path + ".1")
                self.fd = self._open()

    def close(self):
        with self._lock:
            try:
                os.fsync(self.fd)
            finally:
                os.close(self.fd)
