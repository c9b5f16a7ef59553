"""Meter-data feed: a gateway process that serves windows of smart-meter
readings over TCP, and the client the trainer's loader uses.

Wire format: the client sends a 4-byte request ("NEXT"); the gateway answers
with an 8-byte little-endian length and a float32 block of shape
(BATCH, WINDOW + HORIZON) holding normalised half-hourly loads.

Connection settings come from GATEWAY_SOCKET; the gateway serves thousands of
meters in production, so the client keeps its kernel receive buffer small by
default to bound the gateway host's per-connection memory.
"""
import socket
import struct

import numpy as np

GATEWAY_SOCKET = {"recv_buffer": 4096, "keepalive": 1}


def serve(port_conn, batch, window, horizon, seed=0):
    """Gateway process: synthesises daily/weekly load curves for random meters."""
    rng = np.random.default_rng(seed)
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    port_conn.send(srv.getsockname()[1])
    conn, _ = srv.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    span = window + horizon
    t0 = 0
    while True:
        req = conn.recv(4)
        if not req:
            return
        t = t0 + np.arange(span)[None, :] + rng.integers(0, 48 * 7, size=(batch, 1))
        base = rng.uniform(0.3, 1.5, size=(batch, 1))
        daily = np.sin(2 * np.pi * t / 48.0) * rng.uniform(0.1, 0.5, size=(batch, 1))
        weekly = np.cos(2 * np.pi * t / (48.0 * 7)) * 0.2
        block = (base + daily + weekly + 0.05 * rng.standard_normal((batch, span))).astype(np.float32)
        data = block.tobytes()
        conn.sendall(struct.pack("<Q", len(data)) + data)
        t0 += 1


class FeedClient:
    def __init__(self, port, batch, span, opts=None):
        opts = dict(GATEWAY_SOCKET, **(opts or {}))
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, int(opts["recv_buffer"]))
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, int(opts["keepalive"]))
        self.sock.connect(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.shape = (batch, span)
        self.buf = bytearray(batch * span * 4)

    def _recv_exact(self, view):
        got = 0
        while got < len(view):
            n = self.sock.recv_into(view[got:])
            if n == 0:
                raise ConnectionError("gateway closed the feed")
            got += n

    def next_block(self):
        self.sock.sendall(b"NEXT")
        head = bytearray(8)
        self._recv_exact(memoryview(head))
        (n,) = struct.unpack("<Q", head)
        view = memoryview(self.buf)[:n]
        self._recv_exact(view)
        return np.frombuffer(self.buf, np.float32, n // 4).reshape(self.shape).copy()
