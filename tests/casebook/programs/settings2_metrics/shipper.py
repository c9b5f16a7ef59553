"""Metrics log shipper: rotates metrics.jsonl into compressed segments and
uploads them to the metrics store (here a local stub with store-like commit
latency).  Started by train.py; exits (and removes the run directory) when the
trainer goes away."""
import ctypes
import fcntl
import os
import random
import shutil
import signal
import socket
import sys
import threading
import time
import zlib

PR_SET_PDEATHSIG = 1


def store_stub(srv):
    """Accepts segment uploads; replies once the 'commit' is done."""
    rng = random.Random(1)
    while True:
        conn, _ = srv.accept()
        with conn:
            f = conn.makefile("rb")
            while True:
                hdr = f.readline()
                if not hdr:
                    break
                n = int(hdr)
                f.read(n)
                time.sleep(0.08 + 0.04 * rng.random())  # replication / commit latency
                conn.sendall(b"OK\n")


def main():
    workdir, mode = sys.argv[1], sys.argv[2]
    parent = os.getppid()

    def bye(*_):
        shutil.rmtree(workdir, ignore_errors=True)
        os._exit(0)

    signal.signal(signal.SIGTERM, bye)
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except Exception:
        pass
    if os.getppid() != parent:
        bye()

    def watch_stdin():
        sys.stdin.buffer.read()
        bye()

    threading.Thread(target=watch_stdin, name="parent-watch", daemon=True).start()

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    threading.Thread(target=store_stub, args=(srv,), name="store", daemon=True).start()
    up = socket.create_connection(srv.getsockname())
    upf = up.makefile("rb")

    def upload(blob):
        up.sendall(b"%d\n" % len(blob) + blob)
        if upf.readline().strip() != b"OK":
            raise RuntimeError("upload failed")

    path = os.path.join(workdir, "metrics.jsonl")
    seg = 0
    with open(path, "r+b") as f:
        while True:
            time.sleep(0.1)
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            try:
                f.seek(0)
                data = f.read()
                if mode == "snapshot":
                    f.truncate(0)
                else:
                    if data:
                        # only drop local records once the store has them
                        upload(zlib.compress(data, 6))
                    f.truncate(0)
            finally:
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)
            if mode == "snapshot" and data:
                upload(zlib.compress(data, 6))
            seg += 1


if __name__ == "__main__":
    main()
