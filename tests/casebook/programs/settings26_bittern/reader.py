import queue
import struct
import threading

import numpy as np
import torch


class FrameReader(threading.Thread):
    """Reads the decoder child's spectrogram frames from its stdout pipe and queues (features, call type)
    batches for the trainer."""

    def __init__(self, stream, depth):
        super().__init__(name="frame-reader", daemon=True)
        self.stream = stream
        self.out = queue.Queue(maxsize=depth)
        self.count_lock = threading.Lock()
        self.frames = 0

    def read_exact(self, n):
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self.stream.readinto(view[got:])
            if not k:
                raise EOFError("decoder child closed its pipe")
            got += k
        return buf

    def run(self):
        while True:
            n, b, f, _ = struct.unpack("<4I", self.read_exact(16))
            feats = np.frombuffer(self.read_exact(n * b * f * 4), dtype=np.float32).reshape(n, 1, b, f)
            y = np.frombuffer(self.read_exact(n * 8), dtype=np.int64)
            with self.count_lock:
                self.frames += 1
            self.out.put((torch.from_numpy(feats.copy()), torch.from_numpy(y.copy())))
