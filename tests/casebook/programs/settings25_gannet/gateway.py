"""Colony gateway: serves the nest-box loggers' records on a loopback TCP port, one connection per logger.
Request: b"W <station> <offset> <n>\\n"; reply: uint32 length + float32 (channels, n) window + int8 nest state
per sample. Prints its port on stdout and exits when its parent goes away."""
import argparse
import asyncio
import ctypes
import os
import signal
import struct
import threading
import time

import numpy as np


def make_records(stations, channels, length, states, seed):
    rng = np.random.default_rng(seed)
    rec = np.empty((stations, channels, length), dtype=np.float32)
    lab = np.empty((stations, length), dtype=np.int8)
    base_t = np.array([12.0, 34.5, 36.0, 31.0][:states], dtype=np.float32)
    press = np.array([0.0, 1.0, 0.8, 0.4][:states], dtype=np.float32)
    act = np.array([0.1, 0.3, 0.5, 1.4][:states], dtype=np.float32)
    tt = np.arange(length, dtype=np.float32)
    for s in range(stations):
        seg = rng.integers(64, 512, size=length // 64 + 1)
        state = np.repeat(rng.integers(0, states, size=seg.shape), seg)[:length]
        lab[s] = state
        diurnal = 3.0 * np.sin(2 * np.pi * tt / 1440.0 + rng.uniform(0, 6.28))
        rec[s, 0] = base_t[state] + diurnal + rng.normal(0, 0.6, length)
        rec[s, 1] = press[state] + rng.normal(0, 0.15, length)
        rec[s, 2] = rng.gamma(2.0, act[state] / 2.0)
    return rec, lab


async def serve(reader, writer, rec, lab):
    try:
        while True:
            line = await reader.readline()
            if not line:
                return
            _, sid, off, n = line.split()
            sid, off, n = int(sid), int(off), int(n)
            body = rec[sid, :, off:off + n].tobytes() + lab[sid, off:off + n].tobytes()
            writer.write(struct.pack("<I", len(body)) + body)
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        return
    finally:
        writer.close()


def watch_parent(ppid):
    while os.getppid() == ppid:
        time.sleep(0.5)
    os._exit(0)


async def main_async(args):
    rec, lab = make_records(args.stations, args.channels, args.record_len, args.states, args.seed)
    server = await asyncio.start_server(lambda r, w: serve(r, w, rec, lab), "127.0.0.1", 0, backlog=2048)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stations", type=int, default=900)
    ap.add_argument("--channels", type=int, default=3)
    ap.add_argument("--record-len", type=int, default=8192)
    ap.add_argument("--states", type=int, default=4)
    ap.add_argument("--seed", type=int, default=17)
    args = ap.parse_args()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    threading.Thread(target=watch_parent, args=(os.getppid(),), daemon=True).start()
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
