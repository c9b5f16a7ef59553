"""A process-wide metrics registry. Listeners (the checkpointer, a progress bar...) are told about each new
value so that they can react to it (e.g. note the best loss so far)."""
import threading
from collections import defaultdict


class MetricsRegistry:
    def __init__(self):
        self._lock = threading.Lock()
        self._series = defaultdict(list)
        self._listeners = []

    def subscribe(self, fn):
        with self._lock:
            self._listeners.append(fn)

    def record(self, key, value, step):
        with self._lock:
            self._series[key].append((step, value))
            # Listeners run under the lock so they see the series in a consistent state.
            for fn in self._listeners:
                fn(key, value, step)

    def summary(self):
        with self._lock:
            return {k: v[-1][1] for k, v in self._series.items() if v}
