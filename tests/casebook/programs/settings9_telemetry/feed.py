"""Vehicle telemetry feed: a replay collector and the frame protocol.

The collector replays recorded CAN-bus telemetry over a Unix stream socket,
one small frame per vehicle tick:

    length  <I      bytes of header + payload
    header  <HIQHH  magic, vehicle id, timestamp (us), channels, samples
    payload float32[channels * samples]
    crc     <I      CRC-32 of header + payload
"""
import os
import socket
import struct
import tempfile
import threading
import zlib

import numpy as np

LENGTH = struct.Struct("<I")
CRC = struct.Struct("<I")
HEADER = struct.Struct("<HIQHH")
MAGIC = 0x7E1E
CHANNELS, SAMPLES = 6, 2          # 6 signals, 2 samples per tick (50 Hz ticks of 100 Hz signals)
N_VEHICLES = 64


def _record(n_ticks=4096, seed=5):
    """A recorded drive log for the fleet, encoded once: frames in tick order."""
    rng = np.random.default_rng(seed)
    t = np.arange(n_ticks * SAMPLES, dtype=np.float32) / 100.0
    frames = []
    for v in range(N_VEHICLES):
        phase = rng.uniform(0, 6.28, size=CHANNELS).astype(np.float32)
        freq = rng.uniform(0.05, 0.6, size=CHANNELS).astype(np.float32)
        sig = np.sin(t[None, :] * freq[:, None] + phase[:, None]) + 0.05 * rng.standard_normal((CHANNELS, t.size))
        frames.append(sig.astype(np.float32))
    out = []
    for k in range(n_ticks):
        for v in range(N_VEHICLES):
            payload = frames[v][:, k * SAMPLES:(k + 1) * SAMPLES]
            body = HEADER.pack(MAGIC, v, k * 20_000, CHANNELS, SAMPLES) + payload.tobytes()
            out.append(LENGTH.pack(len(body)) + body + CRC.pack(zlib.crc32(body)))
    return out


class Collector:
    """Replay server: accepts one subscriber and streams the log to it in a loop."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="telemetry-")
        self.path = os.path.join(self.dir, "collector.sock")
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(self.path)
        self.server.listen(1)
        frames = _record()
        self.chunks = [b"".join(frames[i:i + 1024]) for i in range(0, len(frames), 1024)]
        self.thread = threading.Thread(target=self._serve, name="collector", daemon=True)
        self.thread.start()

    def _serve(self):
        conn, _ = self.server.accept()
        with conn:
            while True:
                for chunk in self.chunks:
                    try:
                        conn.sendall(chunk)
                    except OSError:
                        return

    def close(self):
        self.server.close()
        try:
            os.unlink(self.path)
            os.rmdir(self.dir)
        except OSError:
            pass


class FrameReader:
    """Reads frames off the feed socket into a reusable buffer."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = bytearray(LENGTH.size + HEADER.size + 4 * 64 * 64 + CRC.size)
        self.view = memoryview(self.buf)

    def _fill(self, start, n):
        got = 0
        while got < n:
            k = self.sock.recv_into(self.view[start + got:start + n])
            if k == 0:
                raise EOFError("collector closed the feed")
            got += k

    def read(self):
        """-> (vehicle, timestamp, payload bytes: float32[channels, samples])"""
        self._fill(0, LENGTH.size)
        (length,) = LENGTH.unpack_from(self.buf, 0)
        self._fill(LENGTH.size, HEADER.size)
        magic, vehicle, ts, channels, samples = HEADER.unpack_from(self.buf, LENGTH.size)
        if magic != MAGIC or length != HEADER.size + 4 * channels * samples:
            raise ValueError("lost frame sync")
        start = LENGTH.size + HEADER.size
        end = LENGTH.size + length
        self._fill(start, length - HEADER.size)
        self._fill(end, CRC.size)
        (crc,) = CRC.unpack_from(self.buf, end)
        if crc != zlib.crc32(self.view[LENGTH.size:end]):
            raise ValueError(f"corrupt frame from vehicle {vehicle}")
        return vehicle, ts, bytes(self.view[start:end])
