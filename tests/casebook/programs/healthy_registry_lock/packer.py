import fcntl
import hashlib
import os
import sys
import time
import zlib

run = sys.argv[1]
while True:
    with open(os.path.join(run, "LOCK"), "a+") as lk:
        fcntl.flock(lk, fcntl.LOCK_EX)  # only to copy a consistent registry
        try:
            with open(os.path.join(run, "log.tsv"), "rb") as f:
                snapshot = f.read()
        except FileNotFoundError:
            snapshot = b""
        fcntl.flock(lk, fcntl.LOCK_UN)
    blob = zlib.compress(snapshot[-65536:] * 4 + os.urandom(1 << 18), 9)
    h = hashlib.sha256()
    for i in range(0, len(blob), 64):
        h.update(blob[i:i + 64])
    total = 0
    for b in blob[:400_000]:
        total = (total * 31 + b) & 0xFFFFFFFF
    time.sleep(0.005)
