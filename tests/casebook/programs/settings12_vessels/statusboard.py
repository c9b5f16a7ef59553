"""A file-like sink for progress bars: keeps the latest line of each bar in a small status file that the ops
console polls (run/<job>/status.txt), instead of letting repaints pile up in the job log."""
import os
import threading


class StatusBoard:
    WIDTH = 128

    def __init__(self, path, rows):
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        os.ftruncate(self.fd, self.WIDTH * rows)
        self._pending = threading.local()

    def slot(self, row):
        return _Slot(self, row)

    def close(self):
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)


class _Slot:
    """What one bar writes to (tqdm calls write() then flush() for each repaint)."""

    def __init__(self, board, row):
        self.board, self.row, self.buf = board, row, []

    def write(self, s):
        self.buf.append(s)

    def flush(self):
        if not self.buf or self.board.fd < 0:
            self.buf.clear()
            return
        line = "".join(self.buf).replace("\r", "").replace("\x1b[A", "").strip("\n")[-(StatusBoard.WIDTH - 1):]
        self.buf.clear()
        os.pwrite(self.board.fd, (line.ljust(StatusBoard.WIDTH - 1) + "\n").encode(), self.row * StatusBoard.WIDTH)

    def isatty(self):
        return False
