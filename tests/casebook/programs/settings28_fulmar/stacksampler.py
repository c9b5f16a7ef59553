"""In-process wall-clock stack sampler for the colony dashboard.

Every `interval_ms` of wall time an interval timer (ITIMER_REAL) raises SIGALRM; the handler takes the stacks of
all Python threads and counts them as folded stacks ("file:func:line;..." -> count), the format the dashboard's
flame graph reads. The counts are written to the scratch directory every `flush_s` seconds."""
import collections
import json
import os
import signal
import sys
import threading
import time
import traceback


class WallSampler:
    def __init__(self, interval_ms, max_depth, flush_s, out_dir, label):
        self.interval = float(interval_ms) / 1000.0
        self.max_depth = int(max_depth)
        self.flush_s = float(flush_s)
        self.out_path = os.path.join(out_dir, f"stacks-{label}.json")
        self.counts = collections.Counter()
        self.samples = 0
        self.last_flush = time.monotonic()
        self.names = {}
        self._busy = False

    def _folded(self, frame):
        summary = traceback.extract_stack(frame, limit=self.max_depth)
        return ";".join(f"{os.path.basename(fs.filename)}:{fs.name}:{fs.lineno}" for fs in summary)

    def _on_alarm(self, signum, frame):
        if self._busy:
            return
        self._busy = True
        try:
            self._sample()
        finally:
            self._busy = False

    def _sample(self):
        if not self.names or len(self.names) != threading.active_count():
            self.names = {t.ident: t.name for t in threading.enumerate()}
        for ident, top in sys._current_frames().items():
            thread = self.names.get(ident, str(ident))
            self.counts[thread + ";" + self._folded(top)] += 1
        self.samples += 1
        now = time.monotonic()
        if now - self.last_flush > self.flush_s:
            self.last_flush = now
            self.flush()

    def flush(self):
        top = collections.Counter(dict(self.counts)).most_common(500)
        tmp = self.out_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"samples": self.samples, "interval_ms": self.interval * 1000.0, "stacks": dict(top)}, f)
        os.replace(tmp, self.out_path)

    def start(self):
        signal.signal(signal.SIGALRM, self._on_alarm)
        signal.setitimer(signal.ITIMER_REAL, self.interval, self.interval)

    def stop(self):
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
