"""Launch the spectrometer driver and wire up its stdout/stderr as the site config says.

[instrument] stdout = "tty" | "pipe"   (scan stream)
[instrument] stderr = "tty" | "pipe"   (driver status console)
A "tty" stream is a pseudo-terminal pair: the driver sees a terminal on that fd.
"""
import os
import pty
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def _endpoint(kind):
    if kind == "tty":
        master, slave = pty.openpty()
        return master, slave
    if kind == "pipe":
        r, w = os.pipe()
        return r, w
    raise ValueError(f"unknown stream kind {kind!r}")


class Driver:
    def __init__(self, cfg):
        self.out_r, out_w = _endpoint(cfg["stdout"])
        self.err_r, err_w = _endpoint(cfg["stderr"])
        cmd = [sys.executable, os.path.join(HERE, "spectrometer.py"), "--parent", str(os.getpid()),
               "--channels", str(cfg["channels"])]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out_w, stderr=err_w,
                                     close_fds=True)
        os.close(out_w)
        os.close(err_w)

    def read(self, n):
        try:
            return os.read(self.out_r, n)
        except OSError:  # EIO on a pty whose slave side has gone away
            return b""

    def read_status(self, n=4096):
        try:
            return os.read(self.err_r, n)
        except OSError:
            return b""

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for fd in (self.out_r, self.err_r):
            try:
                os.close(fd)
            except OSError:
                pass
