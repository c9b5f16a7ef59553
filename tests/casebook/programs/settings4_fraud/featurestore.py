"""A tiny online feature store: a lookup server process and its client.

The server owns per-entity feature tables (cards, merchants) and answers
`lookup` requests over a local TCP socket.  Wire format, both directions:
an 8-byte header (op: u16, table: u16, count: u32) followed by the payload
(int64 ids in a request, float32 rows in a reply).

Client options mirror the ones of our production client:
  tcp_nodelay   -- socket option on the client connection; off by default there
                   so that the many tiny control messages of a session coalesce
                   into fewer packets.
"""
import signal
import socket
import struct
import threading

import numpy as np

HDR = struct.Struct("<HHI")
OP_LOOKUP, OP_STATS, OP_BYE = 1, 2, 3
TABLES = {"card": 0, "merchant": 1}


def _recv_exact(sock, n):
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ConnectionError("peer closed")
        got += k
    return buf


class FeatureServer:
    """Serves lookups from in-memory tables; one thread per connection."""

    def __init__(self, n_cards, n_merchants, dim, seed=0):
        rng = np.random.default_rng(seed)
        self.tables = [rng.normal(0, 1, (n_cards, dim)).astype(np.float32),
                       rng.normal(0, 1, (n_merchants, dim)).astype(np.float32)]
        # slowly drifting aggregates (velocity features), refreshed by a background thread
        self.drift = [np.zeros_like(t[:1]) for t in self.tables]
        self.lock = threading.Lock()
        self.served = 0

    def _refresh(self, stop):
        rng = np.random.default_rng(1)
        while not stop.wait(0.5):
            with self.lock:
                for i, t in enumerate(self.tables):
                    self.drift[i] = 0.99 * self.drift[i] + 0.01 * rng.normal(0, 1, t[:1].shape).astype(np.float32)

    def _serve_conn(self, conn):
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while True:
                op, table, count = HDR.unpack(_recv_exact(conn, HDR.size))
                if op == OP_BYE:
                    return
                if op == OP_STATS:
                    conn.sendall(HDR.pack(OP_STATS, 0, self.served))
                    continue
                ids = np.frombuffer(_recv_exact(conn, 8 * count), np.int64)
                with self.lock:
                    rows = self.tables[table][ids % len(self.tables[table])] + self.drift[table]
                self.served += count
                conn.sendall(HDR.pack(op, table, count) + rows.tobytes())
        except (ConnectionError, OSError):
            return
        finally:
            conn.close()

    def serve_forever(self, listener):
        stop = threading.Event()
        threading.Thread(target=self._refresh, args=(stop,), daemon=True, name="refresh").start()
        while True:
            conn, _ = listener.accept()
            threading.Thread(target=self._serve_conn, args=(conn,), daemon=True, name="conn").start()


def run_server(port_queue, n_cards, n_merchants, dim):
    signal.signal(signal.SIGINT, signal.SIG_IGN)      # the parent decides when the store goes away
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    port_queue.put(listener.getsockname()[1])
    FeatureServer(n_cards, n_merchants, dim).serve_forever(listener)


class FeatureClient:
    def __init__(self, port, dim, tcp_nodelay=False, host="127.0.0.1"):
        self.dim = dim
        self.sock = socket.create_connection((host, port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1 if tcp_nodelay else 0)

    def lookup(self, table, ids):
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        self.sock.sendall(HDR.pack(OP_LOOKUP, TABLES[table], len(ids)))
        self.sock.sendall(ids.tobytes())
        _, _, count = HDR.unpack(_recv_exact(self.sock, HDR.size))
        rows = _recv_exact(self.sock, 4 * self.dim * count)
        return np.frombuffer(rows, np.float32).reshape(count, self.dim)

    def close(self):
        try:
            self.sock.sendall(HDR.pack(OP_BYE, 0, 0))
        finally:
            self.sock.close()
