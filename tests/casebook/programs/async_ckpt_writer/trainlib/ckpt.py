"""Checkpoints written off the training thread: the loop hands over a CPU copy of the weights and goes on;
a writer thread serialises, compresses and atomically replaces the file."""
import io
import logging
import os
import queue
import threading
import zlib

import torch

logger = logging.getLogger(__name__)


class AsyncCheckpointWriter:
    def __init__(self, path, level=3):
        self.path = path
        self.level = level
        self.pending = queue.Queue(maxsize=1)
        self.written = 0
        self.thread = threading.Thread(target=self._run, name="ckpt-async-writer", daemon=True)
        self.thread.start()

    def submit(self, step, state):
        """Non-blocking: if the previous checkpoint is still being written, this one is skipped."""
        snapshot = {k: v.detach().clone() for k, v in state.items()}
        try:
            self.pending.put_nowait((step, snapshot))
            return True
        except queue.Full:
            return False

    def _run(self):
        while True:
            step, snapshot = self.pending.get()
            buf = io.BytesIO()
            torch.save({"step": step, "model": snapshot}, buf)
            blob = zlib.compress(buf.getbuffer(), self.level)
            tmp = f"{self.path}.tmp"
            with open(tmp, "wb") as f:
                f.write(blob)
            os.replace(tmp, self.path)
            self.written += 1
            logger.info("checkpoint step %d written (%.1f MB compressed)", step, len(blob) / 1e6)
