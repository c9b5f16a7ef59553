"""queues: producer- and consumer-starvation planted with real threads, and a healthy flow."""

from __future__ import annotations

import queue
import threading
import time

from probes.queues import Config, QueuesProbe


def _drain(probe: QueuesProbe) -> dict:
    return probe.snapshot(time.monotonic())["q"]


def _wait_blocked(probe: QueuesProbe, side: str) -> None:
    deadline = time.monotonic() + 30
    while not getattr(probe._queues["q"], side).inflight:
        assert time.monotonic() < deadline, f"no thread ever blocked in {side}"
        time.sleep(0.01)


def test_consumer_starved_when_get_blocks_on_empty_queue() -> None:
    probe = QueuesProbe(Config())
    q = probe.watch("q", queue.Queue(maxsize=4))
    assert type(q).__name__ == "WatchedQueue" and isinstance(q, queue.Queue)
    _drain(probe)
    started = threading.Event()

    def consumer() -> None:
        started.set()
        q.get()  # blocks: nobody produces

    t = threading.Thread(target=consumer, daemon=True)
    t.start()
    started.wait(5)
    _wait_blocked(probe, "get")
    _drain(probe)  # the window starts with the consumer already blocked
    time.sleep(0.3)
    reading = _drain(probe)
    assert reading["get_waiting"] == 1
    assert reading["get_blocked_share"] > 0.5  # in-flight wait is credited
    assert reading["put_blocked_share"] == 0.0
    q.put(1)
    t.join(5)
    after = _drain(probe)
    assert after["gets_per_s"] > 0 and after["get_waiting"] == 0
    probe.close()
    assert type(q) is queue.Queue


def test_producer_starved_when_put_blocks_on_full_queue() -> None:
    probe = QueuesProbe(Config())
    q = probe.watch("q", queue.Queue(maxsize=2))
    q.put(0)
    q.put(1)
    _drain(probe)
    t = threading.Thread(target=q.put, args=(2,), daemon=True)
    t.start()
    _wait_blocked(probe, "put")
    _drain(probe)
    time.sleep(0.3)
    reading = _drain(probe)
    assert reading["depth"] == 2 and reading["maxsize"] == 2
    assert reading["put_waiting"] == 1
    assert reading["put_blocked_share"] > 0.5
    assert reading["get_blocked_share"] == 0.0
    q.get()
    t.join(5)
    probe.close()


def test_healthy_flow_is_quiet() -> None:
    probe = QueuesProbe(Config())
    q = probe.watch("q", queue.Queue(maxsize=100))
    _drain(probe)
    for i in range(200):
        q.put(i)
        q.get()
    reading = _drain(probe)
    assert reading["puts_per_s"] > 0 and reading["gets_per_s"] > 0
    assert reading["put_blocked_share"] < 0.2 and reading["get_blocked_share"] < 0.2
    assert len(reading["depth_history"]) == 2
    probe.close()


def test_blocked_time_is_not_counted_twice_across_snapshots() -> None:
    probe = QueuesProbe(Config())
    q = probe.watch("q", queue.Queue())
    t = threading.Thread(target=q.get, daemon=True)
    t.start()
    total = 0.0
    t0 = time.perf_counter()
    for _ in range(3):
        time.sleep(0.1)
        total += _drain(probe)["get_blocked_s"]
    q.put(1)
    t.join(5)
    total += _drain(probe)["get_blocked_s"]
    assert total <= time.perf_counter() - t0 + 0.05


def test_depth_history_is_bounded() -> None:
    probe = QueuesProbe(Config(history_points=5))
    probe.watch("q", queue.Queue())
    for _ in range(20):
        reading = _drain(probe)
    assert len(reading["depth_history"]) == 5


def test_queue_that_cannot_be_instrumented_still_reports_depth() -> None:
    probe = QueuesProbe(Config())
    q = queue.SimpleQueue()
    assert probe.watch("q", q) is q
    q.put(1)
    reading = _drain(probe)
    assert reading["depth"] == 1 and reading["instrumented"] is False
    probe.close()


def test_two_queues_of_one_name_keep_their_own_readings() -> None:
    """Discovery names a queue by its variable: two threads may each hold a `q`."""
    probe = QueuesProbe(Config())
    first, second = queue.Queue(maxsize=2), queue.Queue(maxsize=3)
    probe.watch("q", first)
    probe.watch("q", second)
    probe.watch("q", first)  # the same object again: nothing new
    payload = probe.snapshot(time.monotonic())
    assert payload["q"]["maxsize"] == 2 and payload["q#2"]["maxsize"] == 3 and "q#3" not in payload
    probe.close()
