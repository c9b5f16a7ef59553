"""The threads probe: a thread that dies is recorded (name, exception, the program's frame, time), the program's
own excepthook still runs, a thread that just ends is listed as gone, and closing restores the hook."""

from __future__ import annotations

import threading
import time

import pytest

from probes.threads import ThreadsProbe


def _boom() -> None:
    raise ValueError("bad batch 7")


def test_a_dead_thread_is_recorded_and_the_previous_hook_still_runs() -> None:
    seen: list[str] = []
    previous = threading.excepthook
    threading.excepthook = lambda args: seen.append(args.thread.name if args.thread else "?")
    probe = ThreadsProbe()
    try:
        quiet = threading.Thread(target=lambda: None, name="quiet-1")
        quiet.start()
        probe.snapshot(0.0)  # quiet-1 may or may not be alive here: it is "gone" afterwards either way
        t = threading.Thread(target=_boom, name="learner-3")
        t.start()
        t.join()
        quiet.join()
        payload = probe.snapshot(1.0)
    finally:
        probe.close()
        restored = threading.excepthook
        threading.excepthook = previous
    assert seen == ["learner-3"]  # the program's hook was called
    (death,) = payload["deaths"]
    assert death["thread"] == "learner-3" and death["exception"] == "ValueError: bad batch 7"
    line = _boom.__code__.co_firstlineno + 1
    assert death["where"] == f"test_threads_probe.py:{line} in _boom" and abs(death["wall_time_s"] - time.time()) < 30
    assert payload["deaths_total"] == 1 and payload["hook_errors"] == 0
    assert restored is not probe._hook  # close() put the previous hook back


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # pytest's own hook sees it
def test_system_exit_is_a_quiet_end_and_gone_threads_are_listed() -> None:
    probe = ThreadsProbe()
    try:
        gate = threading.Event()
        t = threading.Thread(target=lambda: (gate.wait(5), (_ for _ in ()).throw(SystemExit)), name="worker-9")
        t.start()
        probe.snapshot(0.0)
        gate.set()
        t.join()
        payload = probe.snapshot(1.0)
    finally:
        probe.close()
    assert payload["deaths"] == []
    assert [g["thread"] for g in payload["gone"]] == ["worker-9"] and payload["gone"][0]["last_seen_wall_s"] > 0
