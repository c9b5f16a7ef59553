import queue
import socket
import struct
import threading

import numpy as np
import torch

from scenes import spectral_indices

REQ = struct.Struct("<5IQ")


class TileLoader(threading.Thread):
    """Requests batches of patches from the tile server over one persistent connection, adds spectral
    indices and cloud masking, and queues normalised tensors."""

    def __init__(self, prof, port, seed):
        super().__init__(name="tile-loader", daemon=True)
        self.prof = prof
        self.port = port
        self.rng = np.random.default_rng(seed)
        self.out = queue.Queue(maxsize=prof.tiles.queue_depth)
        self.count_lock = threading.Lock()
        self.patches = 0
        self.bytes_in = 0

    def _recv_exact(self, sock, n):
        buf = bytearray(n)
        view, got = memoryview(buf), 0
        while got < n:
            k = sock.recv_into(view[got:])
            if not k:
                raise ConnectionError("tile server closed the connection")
            got += k
        return buf

    def run(self):
        t, a = self.prof.tiles, self.prof.archive
        sock = socket.create_connection(("127.0.0.1", self.port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        n, k = t.patches_per_batch, t.patch
        while True:
            sock.sendall(REQ.pack(0, 0, 0, n, k, int(self.rng.integers(0, 2**63))))
            (length,) = struct.unpack("<I", self._recv_exact(sock, 4))
            body = self._recv_exact(sock, length)
            x = np.frombuffer(body, dtype=np.float32, count=n * a.bands * k * k).reshape(n, a.bands, k, k).copy()
            cover = np.frombuffer(body, dtype=np.int64, offset=x.nbytes)
            flip = self.rng.random(n) < 0.5
            x[flip] = x[flip, :, :, ::-1]
            cloud = self.rng.random((n, 1, k, k)) < t.cloud_fraction
            x = np.where(cloud, np.float32(0.8), x)
            feats = np.concatenate([x, spectral_indices(x)], axis=1)
            mean = feats.mean(axis=(0, 2, 3), keepdims=True)
            std = feats.std(axis=(0, 2, 3), keepdims=True) + 1e-3
            xt = torch.from_numpy(((feats - mean) / std).astype(np.float32))
            yt = torch.from_numpy(cover.copy())
            with self.count_lock:
                self.patches += n
                self.bytes_in += length
            self.out.put((xt, yt))
