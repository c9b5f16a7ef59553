"""Discovery (probes/discover.py) looks at the program's objects without touching them: an object that hooks its own
attribute access (torch.distributed.reduce_op warns "deprecated" on every access) is not asked anything, so nothing
reaches the program's stderr, and the queue beside it is still found."""

from __future__ import annotations

import queue
import threading
import types
import warnings
from typing import Any

from probes.discover import discover_objects


class _Noisy:
    """Warns on every attribute access, ``__class__`` included (what isinstance reads)."""

    def __getattribute__(self, name: str) -> Any:
        warnings.warn(f"{name} is deprecated", FutureWarning, stacklevel=2)
        return object.__getattribute__(self, name)


class _Session:
    def __init__(self) -> None:
        self.queues: list[str] = []

    def watch_queue(self, name: str, q: Any) -> None:
        self.queues.append(name)

    def watch_model(self, name: str, m: Any) -> None:
        pass


def test_discovery_never_triggers_an_objects_own_attribute_hooks() -> None:
    ready, done = threading.Event(), threading.Event()
    holder = types.SimpleNamespace(op=_Noisy(), items=[_Noisy()])
    lib = types.ModuleType("fakedist")
    lib.reduce_op = _Noisy()  # type: ignore[attr-defined]

    def loop() -> None:
        batches: queue.Queue[int] = queue.Queue()  # noqa: F841 - discovery reads the frame's locals
        noisy, state, dist = _Noisy(), holder, lib  # noqa: F841 - the frame's locals are what discovery reads
        ready.set()
        done.wait(10)

    worker = threading.Thread(target=loop, daemon=True)
    worker.start()
    ready.wait(10)
    session = _Session()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            discover_objects(session, queues=True, models=True)
    finally:
        done.set()
        worker.join(10)
    assert "batches" in session.queues
    assert [str(w.message) for w in caught] == []
