"""AIS spool parser worker (third-party feed adapter): follows the spool in small
reads as the feed's tailer does, validates each sentence, turns 32-fix track segments
into kinematic feature rows and streams framed float32 batches on stdout.

    python parser.py --parent PID --spool PATH --batch N
"""
import argparse
import math
import os
import struct
import sys
import threading
import time

import aisfeed

FEATURES = 6


def watch_parent(ppid):
    while True:
        if os.getppid() != ppid:
            os._exit(0)
        time.sleep(0.5)


def lines(path, chunk):
    """Follow the spool like `tail -F`: reads of one feed frame (512 bytes), and a
    rotation check (same inode, not truncated) before each read; at the end of the
    spool, start over."""
    fd = os.open(path, os.O_RDONLY)
    ino = os.fstat(fd).st_ino
    tail = b""
    while True:
        st = os.stat(path)
        if st.st_ino != ino or st.st_size < os.lseek(fd, 0, os.SEEK_CUR):
            os.close(fd)
            fd = os.open(path, os.O_RDONLY)
            ino, tail = os.fstat(fd).st_ino, b""
        data = os.read(fd, chunk)
        if not data:
            os.lseek(fd, 0, os.SEEK_SET)
            tail = b""
            continue
        parts = (tail + data).split(b"\n")
        tail = parts.pop()
        for p in parts:
            yield p.decode("ascii")


def parse(line):
    body, _, cs = line[1:].partition("*")
    if int(cs, 16) != aisfeed.checksum(body):
        return None
    f = body.split(",")
    return int(f[2]), int(f[3]), float(f[4]), float(f[5]), float(f[6]), float(f[7]), float(f[8])


def segment_features(fixes):
    rows = []
    t0, lat0, lon0 = fixes[0][2], fixes[0][3], fixes[0][4]
    prev = fixes[0]
    for fx in fixes:
        dt = fx[2] - prev[2]
        dlat = (fx[3] - prev[3]) * 60.0
        dlon = (fx[4] - prev[4]) * 60.0 * math.cos(math.radians(fx[3]))
        dist = math.hypot(dlat, dlon)
        turn = ((fx[6] - prev[6] + 180.0) % 360.0) - 180.0
        rows.extend((math.log1p(dt) / 7.0, dist, fx[5] / 20.0, turn / 180.0,
                     (fx[3] - lat0) * 10.0, (fx[2] - t0) / 3600.0))
        prev = fx
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parent", type=int, required=True)
    ap.add_argument("--spool", required=True)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--chunk", type=int, default=512)
    args = ap.parse_args()
    threading.Thread(target=watch_parent, args=(args.parent,), daemon=True).start()

    out = sys.stdout.buffer
    seg, cur = [], None
    xs, ys = [], []
    for line in lines(args.spool, args.chunk):
        fx = parse(line)
        if fx is None:
            continue
        if fx[0] != cur:
            cur, seg = fx[0], []
        seg.append(fx)
        if len(seg) < aisfeed.SEGMENT:
            continue
        xs.extend(segment_features(seg))
        ys.append(seg[0][1])
        seg = []
        if len(ys) == args.batch:
            head = struct.pack("<III", len(ys), aisfeed.SEGMENT, FEATURES)
            try:
                body = struct.pack(f"<{len(xs)}f", *xs) + struct.pack(f"<{len(ys)}q", *ys)
                out.write(head + body)
                out.flush()
            except BrokenPipeError:
                return
            xs, ys = [], []


if __name__ == "__main__":
    main()
