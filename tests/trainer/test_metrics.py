"""Counting from several threads, and the sinks metrics go to."""

from __future__ import annotations

import sys
import threading

from reference_trainer.metrics import Counters


def test_target_batches_are_counted_under_the_counters_lock() -> None:
    """Several target threads count batches; ``+=`` on a shared int is a read-modify-write."""
    counters = Counters()
    with counters.lock:
        counting = threading.Thread(target=counters.add_target_batch)
        counting.start()
        counting.join(timeout=0.3)
        assert counting.is_alive()  # waits for the lock instead of racing
    counting.join(timeout=5)
    assert counters.target_batches == 1


def test_no_target_batch_is_lost_from_many_threads() -> None:
    counters = Counters()
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as CPython allows
    try:
        threads = [threading.Thread(target=lambda: [counters.add_target_batch() for _ in range(5_000)])
                   for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert counters.target_batches == 40_000
