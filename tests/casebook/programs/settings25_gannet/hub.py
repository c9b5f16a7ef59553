import asyncio
import queue
import selectors
import socket
import struct
import threading

import numpy as np
import torch

SELECTORS = {"epoll": selectors.EpollSelector, "poll": selectors.PollSelector, "select": selectors.SelectSelector}


class StationHub(threading.Thread):
    """Owns the colony hub's event loop: keeps one persistent connection per nest-box logger, reads a
    window from a rotating set of loggers for every batch, and queues (window, nest state) batches."""

    def __init__(self, cfg, port, seed):
        super().__init__(name="station-hub", daemon=True)
        self.cfg = cfg
        self.port = port
        self.rng = np.random.default_rng(seed)
        self.out = queue.Queue(maxsize=cfg.poll.queue_depth)
        self.ready = threading.Event()
        self.count_lock = threading.Lock()
        self.polled = 0

    def run(self):
        loop = asyncio.SelectorEventLoop(SELECTORS[self.cfg.hub.selector]())
        asyncio.set_event_loop(loop)
        loop.run_until_complete(self.main())

    async def connect(self, h):
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", self.port, limit=h.stream_limit_kb * 1024), h.connect_timeout_s)
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, int(h.tcp_nodelay))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, int(h.keepalive))
        return reader, writer

    async def read_window(self, conn, sid, off, n):
        reader, writer = conn
        writer.write(b"W %d %d %d\n" % (sid, off, n))
        (length,) = struct.unpack("<I", await reader.readexactly(4))
        return await reader.readexactly(length)

    async def main(self):
        c, p = self.cfg.colony, self.cfg.poll
        conns = [await self.connect(self.cfg.hub) for _ in range(c.stations)]
        self.ready.set()
        ch, w = c.channels, p.window
        while True:
            sids = self.rng.choice(c.stations, size=p.polls_per_batch, replace=False)
            offs = self.rng.integers(0, c.record_len - w, size=p.polls_per_batch)
            xs, ys = [], []
            for sid, off in zip(sids.tolist(), offs.tolist()):
                body = await self.read_window(conns[sid], sid, off, w)
                xs.append(np.frombuffer(body, dtype=np.float32, count=ch * w).reshape(ch, w))
                ys.append(np.bincount(np.frombuffer(body, dtype=np.int8, offset=ch * w * 4),
                                      minlength=c.states).argmax())
            x = np.stack(xs)
            x = (x - x.mean(axis=(0, 2), keepdims=True)) / (x.std(axis=(0, 2), keepdims=True) + 1e-3)
            with self.count_lock:
                self.polled += len(ys)
            await asyncio.to_thread(self.out.put, (torch.from_numpy(x.astype(np.float32)),
                                                   torch.tensor(ys, dtype=torch.long)))
