"""The collectives probe (probes/collectives.py) on a real gloo group of one rank in this process: every call is
numbered once (a collective inside another is not counted twice), the call a thread is in shows while it waits,
errors pass through unchanged, and close() puts torch.distributed's functions back."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available():  # pragma: no cover
    pytest.skip("torch.distributed is not available", allow_module_level=True)

from dflash_contract.board import CollectivesKeys as K  # noqa: E402
from probes.collectives import CollectivesProbe  # noqa: E402


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    store = dist.FileStore(str(Path(tmp_path_factory.mktemp("store")) / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_each_call_is_numbered_once_and_timed(group: None) -> None:
    before = dist.all_reduce
    probe = CollectivesProbe()
    try:
        assert dist.all_reduce is not before and dist.distributed_c10d.all_reduce is dist.all_reduce
        t = torch.ones(4)
        dist.all_reduce(t)
        dist.barrier()
        out: list[object] = [None]
        dist.all_gather_object(out, {"step": 3})  # calls all_gather inside: one call, not two
        work = dist.all_reduce(t, async_op=True)
        work.wait()
        snap = probe.snapshot(time.monotonic())
        assert snap["status"] == "ok" and snap[K.ARMED] is True
        assert snap[K.FROM_START] is False  # the group existed before the probe: earlier calls were not seen
        assert (snap[K.BACKEND], snap[K.RANK], snap[K.WORLD_SIZE]) == ("gloo", 0, 1)
        assert snap[K.ENTERED] == 4 and snap[K.COMPLETED] == 4 and snap[K.ASYNC_ISSUED] == 1
        assert [r[K.OP] for r in snap[K.RECENT]] == ["all_reduce", "barrier", "all_gather_object", "all_reduce"]
        assert [r[K.SEQ] for r in snap[K.RECENT]] == [1, 2, 3, 4]
        assert snap[K.BY_OP]["all_reduce"][K.COUNT] == 2 and snap[K.CURRENT] == []
        assert snap[K.LAST][K.SEQ] == 4 and snap[K.IN_COLLECTIVES_S] >= 0.0
        assert out[0] == {"step": 3}
    finally:
        probe.close()
    assert dist.all_reduce is before and dist.distributed_c10d.all_reduce is before


def test_the_call_a_thread_waits_in_shows_and_an_error_passes_through(group: None,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    entered = threading.Event()

    def slow_barrier(*args: object, **kwargs: object) -> None:
        entered.set()
        release.wait(10)
        raise RuntimeError("peer gone")

    monkeypatch.setattr(dist, "barrier", slow_barrier)
    monkeypatch.setattr(dist.distributed_c10d, "barrier", slow_barrier)
    probe = CollectivesProbe()
    errors: list[BaseException] = []

    def call() -> None:
        try:
            dist.barrier()
        except RuntimeError as exc:
            errors.append(exc)

    thread = threading.Thread(target=call, name="trainer")
    try:
        thread.start()
        assert entered.wait(10)
        snap = probe.snapshot(time.monotonic())
        [current] = snap[K.CURRENT]
        assert current[K.OP] == "barrier" and current[K.THREAD] == "trainer" and current[K.SEQ] == 1
        assert 0 <= time.time() - current[K.SINCE_WALL_S] < 10
        release.set()
        thread.join(10)
        assert [str(e) for e in errors] == ["peer gone"]  # the program's own error, untouched
        snap = probe.snapshot(time.monotonic())
        assert snap[K.CURRENT] == [] and snap[K.COMPLETED] == 1 and snap["hook_errors"] == 0
    finally:
        release.set()
        probe.close()
    assert dist.barrier is slow_barrier


def test_a_second_probe_does_not_wrap_the_wrapper(group: None) -> None:
    first = CollectivesProbe()
    second = CollectivesProbe()
    try:
        dist.all_reduce(torch.ones(2))
        assert first.snapshot(0.0)[K.ENTERED] == 1
        assert second.snapshot(0.0)[K.ENTERED] == 0  # the functions were already ours: nothing wrapped twice
    finally:
        second.close()
        first.close()
