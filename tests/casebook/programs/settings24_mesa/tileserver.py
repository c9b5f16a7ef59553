"""Scene tile server: holds the survey's scene archive and answers patch requests on a TCP socket.
Request: 5 x uint32 (reserved, reserved, reserved, count, patch) + uint64 seed, from which the server draws
the patch positions; reply: uint32 length + float32 patches + int64 centre classes. Prints its port on
stdout and exits when its parent goes away."""
import argparse
import ctypes
import os
import signal
import socket
import struct
import threading
import time

import numpy as np

from scenes import SceneBank

REQ = struct.Struct("<5IQ")


def apply_uplink_options(conn, args):
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, int(args.nodelay))
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, int(args.keepalive))
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, args.send_buffer_kb * 1024)
    if args.max_pacing_mbit > 0:
        so_max_pacing_rate = getattr(socket, "SO_MAX_PACING_RATE", 47)
        conn.setsockopt(socket.SOL_SOCKET, so_max_pacing_rate, args.max_pacing_mbit * 125_000)


def recv_exact(conn, n):
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = conn.recv_into(view[got:])
        if not k:
            return None
        got += k
    return bytes(buf)


def serve(conn, bank, args):
    apply_uplink_options(conn, args)
    size = bank.images.shape[-1]
    with conn:
        while True:
            req = recv_exact(conn, REQ.size)
            if req is None:
                return
            _, _, _, count, patch, seed = REQ.unpack(req)
            rng = np.random.default_rng(seed)
            scene = rng.integers(0, len(bank.images), size=count)
            ys = rng.integers(0, size - patch, size=count)
            xs = rng.integers(0, size - patch, size=count)
            x = np.stack([bank.images[i, :, y:y + patch, q:q + patch] for i, y, q in zip(scene, ys, xs, strict=True)])
            c = np.array([bank.cover[i, y + patch // 2, q + patch // 2] for i, y, q in zip(scene, ys, xs, strict=True)],
                         dtype=np.int64)
            body = x.tobytes() + c.tobytes()
            conn.sendall(struct.pack("<I", len(body)) + body)


def watch_parent(ppid):
    while os.getppid() == ppid:
        time.sleep(0.5)
    os._exit(0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenes", type=int, default=24)
    ap.add_argument("--bands", type=int, default=6)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--classes", type=int, default=6)
    ap.add_argument("--seed", type=int, default=2)
    ap.add_argument("--nodelay", type=int, default=1)
    ap.add_argument("--keepalive", type=int, default=1)
    ap.add_argument("--send-buffer-kb", type=int, default=4096)
    ap.add_argument("--max-pacing-mbit", type=int, default=0)
    args = ap.parse_args()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    threading.Thread(target=watch_parent, args=(os.getppid(),), daemon=True).start()
    bank = SceneBank(args.scenes, args.bands, args.size, args.classes, args.seed)
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    print(srv.getsockname()[1], flush=True)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve, args=(conn, bank, args), daemon=True).start()


if __name__ == "__main__":
    main()
