"""sources/store.py: the job's store found from a process's environment, joined as one more client, every rank's
summary read with one check and one multi_get, requests posted and answers gathered by a deadline; a store that
stops answering or a tool without torch give an N/A, never a hang or a traceback.

The store is a real TCPStore served by this process; the ranks' posts are written as the probes write them (by
the real probe for rank 0, in this process, and by hand for the others, whose processes these tests do not run).
"""

from __future__ import annotations

import datetime
import json
import sys
import threading
import time
from collections.abc import Iterator

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

from dflash_contract import mailbox as mb  # noqa: E402
from dflash_contract.mailbox import SummaryKeys  # noqa: E402
from dflash_diag.model.common import NA  # noqa: E402
from dflash_diag.model.mailbox import StoreAddress  # noqa: E402
from dflash_diag.sources import store as store_source  # noqa: E402
from dflash_diag.sources.store import Mailbox, StoreConfig, address_from_environ, store_address  # noqa: E402
from probes.mailbox import Config, MailboxProbe  # noqa: E402

FAST = StoreConfig(connect_timeout_s=2.0, call_timeout_s=2.0, poll_s=0.05, deadline_s=5.0)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def master() -> Iterator[object]:
    store = dist.TCPStore("127.0.0.1", _free_port(), is_master=True, wait_for_workers=False,
                          timeout=datetime.timedelta(seconds=10))
    yield store


def _address(master: object, world: int) -> StoreAddress:
    return StoreAddress(host="127.0.0.1", port=master.port, world_size=world, from_pid=1)  # type: ignore[attr-defined]


def _summary(rank: int, world: int, **extra: object) -> bytes:
    doc = {SummaryKeys.SCHEMA: mb.SUMMARY_SCHEMA, SummaryKeys.RANK: rank, SummaryKeys.WORLD_SIZE: world,
           SummaryKeys.POSTS: 3, SummaryKeys.POSTED_WALL_S: time.time(), SummaryKeys.INTERVAL_S: 2.0,
           SummaryKeys.NODE_RANK: rank // 2, SummaryKeys.HOST: f"node{rank // 2}", **extra}
    return json.dumps(doc).encode()


def test_the_address_comes_from_a_rank_below_the_launcher() -> None:
    envs = {10: {"PATH": "/bin"}, 11: {"HOME": "/root"},
            12: {"MASTER_ADDR": "node0.cluster", "MASTER_PORT": "29500", "WORLD_SIZE": "16", "RANK": "3"}}
    tree = {10: (11,), 11: (12,), 12: ()}
    found = store_address(10, environ=envs.__getitem__, children=tree.__getitem__)
    assert found == StoreAddress(host="node0.cluster", port=29500, world_size=16, from_pid=12)
    nothing = store_address(11, environ={11: {}}.__getitem__, children=lambda pid: ())
    assert isinstance(nothing, NA) and "MASTER_ADDR" in nothing.reason
    for bad in ({"MASTER_ADDR": "h; rm -rf /", "MASTER_PORT": "1", "WORLD_SIZE": "2"},
                {"MASTER_ADDR": "h", "MASTER_PORT": "70000", "WORLD_SIZE": "2"},
                {"MASTER_ADDR": "h", "MASTER_PORT": "29500", "WORLD_SIZE": "0"},
                {"MASTER_ADDR": "h", "MASTER_PORT": " 29500", "WORLD_SIZE": "2"}):
        assert address_from_environ(bad, 1) is None, bad


def test_every_rank_is_read_with_one_check_and_one_multi_get(master: object) -> None:
    world = 4
    for rank in range(world):
        master.set(mb.summary_key(rank), _summary(rank, world))  # type: ignore[attr-defined]
    box = Mailbox.open(_address(master, world), FAST)
    assert not isinstance(box, NA)
    read = box.read_summaries()
    assert not isinstance(read, NA)
    assert [p.rank for p in read.posts] == [0, 1, 2, 3] and [p.node_rank for p in read.posts] == [0, 0, 1, 1]
    assert read.silent_ranks == () and read.invalid == () and read.round_trips == 2
    assert all(abs(p.age_s) < 5 and not p.stale for p in read.posts)


def test_a_silent_rank_and_a_bad_post_are_named_and_the_rest_is_read(master: object) -> None:
    world = 6
    for rank in (0, 1, 3):
        master.set(mb.summary_key(rank), _summary(rank, world))  # type: ignore[attr-defined]
    master.set(mb.summary_key(4), b'{"schema": "dflash-diag.mailbox-summary/1", "rank": 1}')  # type: ignore[attr-defined]
    master.set(mb.summary_key(5), _summary(5, world, posted_wall_s=time.time() - 60))  # type: ignore[attr-defined]
    box = Mailbox.open(_address(master, world), FAST)
    read = box.read_summaries()  # type: ignore[union-attr]
    assert not isinstance(read, NA)
    assert read.silent_ranks == (2,) and [r for r, _ in read.invalid] == [4] and "names rank 1" in read.invalid[0][1]
    assert [p.rank for p in read.posts] == [0, 1, 3, 5] and [p.rank for p in read.posts if p.stale] == [5]


class _Stalled:
    """A store whose server stopped answering: every call waits (as torch's client does) until released."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def _wait(self, *args: object) -> bool:
        self.release.wait(30)
        return True

    check = multi_get = add = set = _wait


def test_a_store_that_stops_answering_gives_an_na_by_the_deadline_and_stays_broken() -> None:
    stalled = _Stalled()
    config = StoreConfig(call_timeout_s=0.3, connect_timeout_s=0.3)
    box = Mailbox.open(StoreAddress("h", 1, 4, 1), config, connect=lambda host, port, timeout_s: stalled)
    assert not isinstance(box, NA)
    t0 = time.perf_counter()
    read = box.read_summaries()
    assert isinstance(read, NA) and "did not answer within 0.3 s" in read.reason
    assert time.perf_counter() - t0 < 1.0
    again = box.gather_stacks()
    assert isinstance(again, NA) and time.perf_counter() - t0 < 1.1  # broken: no second wait
    stalled.release.set()


def test_joining_a_store_nobody_serves_is_an_na() -> None:
    box = Mailbox.open(StoreAddress("127.0.0.1", _free_port(), 2, 1), StoreConfig(connect_timeout_s=0.5,
                                                                                   call_timeout_s=1.0))
    assert isinstance(box, NA) and "cannot join the job's store at 127.0.0.1:" in box.reason


def test_without_torch_in_the_tools_environment_the_mailbox_is_na(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch.distributed", None)  # what an environment without torch gives
    box = Mailbox.open(StoreAddress("127.0.0.1", 1, 2, 1), FAST)
    assert isinstance(box, NA) and "torch is not importable" in box.reason


@pytest.fixture
def rank0(master: object) -> Iterator[MailboxProbe]:
    """This process as rank 0 of a one-rank gloo group over the module's store, with the real mailbox probe."""
    dist.init_process_group("gloo", store=dist.PrefixStore("job", master), rank=0, world_size=1)
    probe = MailboxProbe(Config(post_interval_s=0.2, poll_interval_s=0.05))
    try:
        probe.snapshot(time.monotonic())
        yield probe
    finally:
        probe.close()
        dist.destroy_process_group()


def test_stacks_and_flight_recorder_are_gathered_from_the_real_probe(master: object, rank0: MailboxProbe) -> None:
    """The probe found the store under the job's PrefixStores (its own connection to the same server)."""
    t = torch.ones(16)
    for _ in range(4):
        dist.all_reduce(t)
    box = Mailbox.open(_address(master, 1), FAST)
    assert not isinstance(box, NA)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        read = box.read_summaries()
        # Earlier tests' groups stay in torch's recorder with older uids: this test's group is the newest.
        newest = max(read.posts[0].groups, key=lambda g: int(g.pg_id)) \
            if not isinstance(read, NA) and read.posts and read.posts[0].groups else None
        # The recorder marks a collective completed after it is enqueued (another thread does): wait for both.
        if newest is not None and (newest.last_enqueued or 0) >= 4 and (newest.last_completed or 0) >= 3:
            break
        time.sleep(0.1)
    assert newest is not None and (newest.last_enqueued or 0) >= 4 and (newest.last_completed or 0) >= 3
    stacks = box.gather_stacks()
    assert not isinstance(stacks, NA) and stacks.silent_ranks == () and stacks.invalid == ()
    main = next(t for t in stacks.answers[0].threads if t.name == "MainThread")
    assert any(f.function == "test_stacks_and_flight_recorder_are_gathered_from_the_real_probe" for f in main.frames)
    fr = box.gather_flight_recorder()
    assert not isinstance(fr, NA) and fr.silent_ranks == ()
    ops = [e for e in fr.dumps[0].entries if e.op == "all_reduce"]
    assert len(ops) >= 4 and ops[-1].input_sizes == ((16,),) and fr.dumps[0].request_id == fr.request_id


def test_a_rank_that_does_not_answer_is_silent_by_the_deadline(master: object) -> None:
    box = Mailbox.open(_address(master, 3), StoreConfig(deadline_s=0.5, poll_s=0.05))
    t0 = time.perf_counter()
    got = box.gather_stacks()  # type: ignore[union-attr]
    assert not isinstance(got, NA) and got.answers == () and got.silent_ranks == (0, 1, 2)
    assert 0.5 <= time.perf_counter() - t0 < 2.0


def test_an_answer_to_an_older_request_is_not_taken(master: object) -> None:
    master.add(mb.request_key(mb.KIND_STACKS), 1)  # type: ignore[attr-defined]  # an earlier reader's request 1
    master.set(mb.answer_key(mb.KIND_STACKS, 7), json.dumps({  # type: ignore[attr-defined]
        "schema": mb.ANSWER_SCHEMA, "kind": mb.KIND_STACKS, "rank": 7, "request_id": 1,
        "answered_wall_s": time.time(), "threads": []}).encode())
    master.set(mb.answered_key(mb.KIND_STACKS, 7), b"1")  # type: ignore[attr-defined]
    box = Mailbox.open(_address(master, 8), StoreConfig(deadline_s=0.3, poll_s=0.05))
    got = box.gather_stacks(ranks=[7])  # type: ignore[union-attr]
    assert not isinstance(got, NA) and got.answers == () and got.silent_ranks == (7,) and got.request_id > 1


def test_store_source_keeps_torch_out_until_used() -> None:
    assert "torch" not in store_source.__dict__
