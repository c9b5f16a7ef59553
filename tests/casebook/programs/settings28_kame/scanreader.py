"""Scan reader child: streams core-scan records from a shard file to stdout.

The shard is read with O_DIRECT (the node's page cache is kept for the interactive viewer), one batch of
records per read, and each batch goes out as a small header and the raw int16 payload. The reader leaves as
soon as its stdin closes (the trainer went away)."""
import argparse
import mmap
import os
import struct
import sys
import threading
import zlib

HEADER = struct.Struct("<IIQ")


def watch_stdin():
    def _wait():
        try:
            while sys.stdin.buffer.read(1):
                pass
        finally:
            os._exit(0)
    threading.Thread(target=_wait, name="stdin-watch", daemon=True).start()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shard", required=True)
    ap.add_argument("--record-bytes", type=int, required=True)
    ap.add_argument("--batch", type=int, required=True)
    args = ap.parse_args()
    watch_stdin()
    size = os.path.getsize(args.shard)
    chunk = args.record_bytes * args.batch
    n_chunks = size // chunk
    fd = os.open(args.shard, os.O_RDONLY | os.O_DIRECT)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
    except OSError:
        pass
    buf = mmap.mmap(-1, chunk)
    out = sys.stdout.buffer
    seq = 0
    try:
        while True:
            off = (seq % n_chunks) * chunk
            got = os.preadv(fd, [buf], off)
            if got != chunk:
                raise OSError(f"short read {got} at {off}")
            view = memoryview(buf)
            crc = zlib.crc32(view)
            out.write(HEADER.pack(seq, crc, chunk))
            out.write(view)
            out.flush()
            view.release()
            seq += 1
    except BrokenPipeError:
        os._exit(0)


if __name__ == "__main__":
    main()
