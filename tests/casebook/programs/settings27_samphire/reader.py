"""Tile reader child: checks every shard once, then serves random crops of random tiles.

Reads the shard list from argv, writes frames to stdout: uint32 count, uint32 crop, then count
records (8-byte tile header + crop x crop bytes). Tiles are stored whole (640 x 640 bytes after the
header), so each crop costs a read of its whole record. Exits when the trainer closes the pipe."""
import argparse
import os
import random
import struct
import sys
import zlib

TILE = 640
RECORD = TILE * TILE + 8


def verify(paths):
    """One sequential pass over every shard (a crc per shard, as the survey manifest lists them)."""
    crcs = []
    for p in paths:
        crc = 0
        with open(p, "rb", buffering=0) as f:
            while True:
                chunk = f.read(1 << 20)
                if not chunk:
                    break
                crc = zlib.crc32(chunk, crc)
        crcs.append(crc)
    return crcs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiles", type=int, required=True)
    ap.add_argument("--crop", type=int, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("shards", nargs="+")
    args = ap.parse_args()
    crcs = verify(args.shards)
    print(f"reader: {len(crcs)} shards verified", file=sys.stderr, flush=True)
    fds = [os.open(p, os.O_RDONLY) for p in args.shards]
    for fd in fds:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
    counts = [os.fstat(fd).st_size // RECORD for fd in fds]
    rng = random.Random(args.seed)
    c = args.crop
    out = sys.stdout.buffer
    try:
        while True:
            parts = [struct.pack("<II", args.tiles, c)]
            for _ in range(args.tiles):
                s = rng.randrange(len(fds))
                i = rng.randrange(counts[s])
                rec = os.pread(fds[s], RECORD, i * RECORD)
                oy, ox = rng.randrange(TILE - c), rng.randrange(TILE - c)
                parts.append(rec[:8])
                base = 8 + oy * TILE + ox
                parts.extend(rec[base + r * TILE: base + r * TILE + c] for r in range(c))
            out.write(b"".join(parts))
            out.flush()
    except (BrokenPipeError, ConnectionResetError):
        pass


if __name__ == "__main__":
    main()
