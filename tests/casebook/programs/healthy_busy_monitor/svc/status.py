"""Side services of a training job: a status port (for `nc host port` health checks) and a stats logger."""
import collections
import logging
import socket
import statistics
import threading
import time

log = logging.getLogger("svc")


class StatusPort(threading.Thread):
    """Answers one line of JSON-ish status per connection; almost nobody ever connects."""

    def __init__(self, stats):
        super().__init__(name="status-port", daemon=True)
        self.stats = stats
        self.sock = socket.create_server(("127.0.0.1", 0))

    def run(self):
        while True:
            conn, _ = self.sock.accept()
            with conn:
                conn.sendall(f"{self.stats.snapshot()}\n".encode())


class StepStats:
    def __init__(self, window=200):
        self._times = collections.deque(maxlen=window)
        self._losses = collections.deque(maxlen=window)
        self._lock = threading.Lock()
        self.steps = 0

    def add(self, seconds, loss):
        with self._lock:
            self._times.append(seconds)
            self._losses.append(loss)
            self.steps += 1

    def snapshot(self):
        with self._lock:
            times, losses, steps = list(self._times), list(self._losses), self.steps
        if not times:
            return {"steps": 0}
        return {"steps": steps, "step_ms": 1e3 * statistics.median(times), "loss": statistics.fmean(losses)}


class StatsLogger(threading.Thread):
    def __init__(self, stats, every_s=2.0):
        super().__init__(name="stats-logger", daemon=True)
        self.stats, self.every_s = stats, every_s

    def run(self):
        while True:
            time.sleep(self.every_s)
            log.info("stats %s", self.stats.snapshot())
