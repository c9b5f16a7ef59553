"""Thread plumbing the trainer and its scenarios share: visible thread names, queue waits that notice a stop."""

from __future__ import annotations

import contextlib
import ctypes
import queue
import threading
from typing import Any

QUEUE_POLL_S = 0.25  # how often a blocked put/get re-checks the stop flag
_PR_SET_NAME = 15


def name_this_thread(name: str) -> None:
    """Python name (py-spy, probes) and, best effort, the kernel name (/proc/<pid>/task/<tid>/comm, top -H).

    Never on the main thread: its kernel name is the process name that ps and top show."""
    threading.current_thread().name = name
    if threading.current_thread() is threading.main_thread():
        return
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_NAME, name.encode()[:15], 0, 0, 0)


def put_until_stopped(bounded_queue: queue.Queue[Any], item: Any, stop: threading.Event) -> bool:
    """``put(item)`` that gives up (False) once ``stop`` is set, never a bare blocking call."""
    while not stop.is_set():
        try:
            bounded_queue.put(item, timeout=QUEUE_POLL_S)
            return True
        except queue.Full:
            continue
    return False


def get_until_stopped(bounded_queue: queue.Queue[Any], stop: threading.Event) -> Any | None:
    """``get()`` that gives up (None) once ``stop`` is set."""
    while not stop.is_set():
        try:
            return bounded_queue.get(timeout=QUEUE_POLL_S)
        except queue.Empty:
            continue
    return None
