"""On-access specimen scanner (child process): watches the spool directory with fanotify
and checks the header of every specimen file that is opened (magic, declared size) before
the image reaches a model. mode 'enforce' asks for permission events (FAN_OPEN_PERM: the
opener waits for our verdict), mode 'audit' for plain open notifications (FAN_OPEN).
Prints 'ready' on stdout once the watch is in place; keeps counts in scanner.json.

    python scanner.py --parent PID --spool DIR --mode enforce|audit
"""
import argparse
import ctypes
import json
import os
import struct
import sys
import threading
import time

FAN_CLOEXEC = 0x1
FAN_CLASS_CONTENT = 0x4
FAN_OPEN = 0x20
FAN_OPEN_PERM = 0x10000
FAN_EVENT_ON_CHILD = 0x08000000
FAN_MARK_ADD = 0x1
FAN_ALLOW = 0x1
AT_FDCWD = -100
EVENT = struct.Struct("IBBHQii")    # fanotify_event_metadata
MAGIC = b"HRBM"

libc = ctypes.CDLL(None, use_errno=True)
libc.fanotify_init.argtypes = [ctypes.c_uint, ctypes.c_uint]
libc.fanotify_mark.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_uint64, ctypes.c_int,
                               ctypes.c_char_p]


def watch_parent(ppid):
    while True:
        if os.getppid() != ppid:
            os._exit(0)
        time.sleep(0.5)


def check(fd, stats):
    head = os.pread(fd, 16, 0)
    path = os.readlink(f"/proc/self/fd/{fd}")
    if head[:4] != MAGIC:
        stats["bad_magic"] += 1
        return
    h, w = struct.unpack_from("<II", head, 4)
    if os.fstat(fd).st_size != 16 + h * w * 3:
        stats["bad_size"] += 1
    stats["last"] = os.path.basename(path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parent", type=int, required=True)
    ap.add_argument("--spool", required=True)
    ap.add_argument("--mode", choices=("enforce", "audit"), default="audit")
    args = ap.parse_args()
    threading.Thread(target=watch_parent, args=(args.parent,), daemon=True).start()

    fan = libc.fanotify_init(FAN_CLOEXEC | FAN_CLASS_CONTENT, os.O_RDONLY | os.O_LARGEFILE)
    if fan < 0:
        print(f"ready (fanotify unavailable: errno {ctypes.get_errno()})", flush=True)
        while True:
            time.sleep(3600)
    mask = (FAN_OPEN_PERM if args.mode == "enforce" else FAN_OPEN) | FAN_EVENT_ON_CHILD
    if libc.fanotify_mark(fan, FAN_MARK_ADD, mask, AT_FDCWD, args.spool.encode()) != 0:
        print(f"ready (fanotify_mark failed: errno {ctypes.get_errno()})", flush=True)
        while True:
            time.sleep(3600)
    print("ready", flush=True)

    stats = {"events": 0, "bad_magic": 0, "bad_size": 0, "last": ""}
    report = os.path.join(args.spool, os.pardir, "scanner.json")
    last_report = time.monotonic()
    while True:
        buf = os.read(fan, 4096)
        off = 0
        while off + EVENT.size <= len(buf):
            ev_len, _, _, _, ev_mask, fd, _pid = EVENT.unpack_from(buf, off)
            off += ev_len
            if fd < 0:
                continue
            try:
                check(fd, stats)
                stats["events"] += 1
            finally:
                if ev_mask & FAN_OPEN_PERM:
                    os.write(fan, struct.pack("iI", fd, FAN_ALLOW))
                os.close(fd)
        if time.monotonic() - last_report > 5:
            with open(report, "w") as f:
                json.dump(stats, f)
            last_report = time.monotonic()


if __name__ == "__main__":
    main()
