"""Stall watchdog for unattended runs on the shared forecast boxes.

Remembers, for every thread, the last source line it executed; if the
training loop makes no progress for `limit_s` seconds the watchdog prints
where each thread was and exits, so the scheduler can restart the job
instead of letting it hang all weekend.

Modes
-----
trace   record the position with a trace function (exact, every line)
sample  look at sys._current_frames() once a second (coarse)

In both modes the start-up phase (model build, first batches) is traced,
because that is where most of our hangs were (NFS, stuck imports).
"""
import contextlib
import os
import sys
import threading
import time


class StallWatchdog:
    def __init__(self, limit_s=300.0, mode="trace"):
        self.limit_s = float(limit_s)
        self.mode = mode
        self.where = {}
        self._beat = time.monotonic()

    # -- trace function ------------------------------------------------------
    def _trace(self, frame, event, arg):
        self.where[threading.get_ident()] = (frame.f_code.co_filename, frame.f_lineno)
        return self._trace

    @contextlib.contextmanager
    def startup(self):
        sys.settrace(self._trace)
        try:
            yield
        finally:
            if self.mode != "trace":
                sys.settrace(None)

    def arm(self):
        if self.mode == "trace":
            threading.settrace(self._trace)
            sys.settrace(self._trace)
        threading.Thread(target=self._watch, name="stall-watchdog", daemon=True).start()

    def heartbeat(self):
        self._beat = time.monotonic()

    # -- watcher -------------------------------------------------------------
    def _watch(self):
        sys.settrace(None)
        while True:
            time.sleep(1.0)
            if self.mode == "sample":
                for ident, frame in sys._current_frames().items():
                    self.where[ident] = (frame.f_code.co_filename, frame.f_lineno)
            if time.monotonic() - self._beat > self.limit_s:
                for ident, pos in list(self.where.items()):
                    print(f"[watchdog] thread {ident} stalled at {pos[0]}:{pos[1]}", file=sys.stderr, flush=True)
                os._exit(3)
