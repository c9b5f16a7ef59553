import threading
from collections import defaultdict


class MetricTracker:
    """Keeps every logged value so that curves can be smoothed and plotted at the end of the run."""

    def __init__(self):
        self._values = defaultdict(list)
        self._lock = threading.Lock()

    def update(self, name, value):
        with self._lock:
            self._values[name].append(value)   # BUG: a tensor with its graph, not value.item()

    def smoothed(self, name, window=20):
        with self._lock:
            tail = self._values[name][-window:]
        if not tail:
            return float("nan")
        return float(sum(float(v) for v in tail) / len(tail))

    def count(self, name):
        with self._lock:
            return len(self._values[name])
