"""The mailbox on a real multi-node job on one machine (tests/multinode_bed.py): two torchrun launchers, --nnodes 2,
c10d rendezvous on 127.0.0.1, two gloo ranks each, every rank under `dflash-diag run` (its probes, the mailbox among
them). From node 0's launcher PID alone, the reader joins the job's store and reads all four ranks, node 1's
included: their summaries with one multi_get, their stacks on request, and their Flight Recorder dumps, from which
the matcher names the rank on node 1 that never entered the collective the three others wait in."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from multinode_bed import two_node_job

from dflash_diag.analysis.flightrec import match_flight_recorder
from dflash_diag.model.common import NA
from dflash_diag.sources.store import Mailbox, open_mailbox

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
ANSWER_BOUND_S = 10.0  # the mailbox's part of "named within 10 s": read, ask, gather (torch's import aside)


def _open(pid: int) -> Mailbox:
    box = open_mailbox(pid)
    assert not isinstance(box, NA), box
    return box


def test_node_0s_launcher_reads_every_ranks_summary_and_stacks() -> None:
    with two_node_job("mn_healthy") as job:
        job.find_ranks()
        # Step 200 is at least 4 s of training (each step sleeps 20 ms): a summary is posted every 2 s, so the
        # latest one, however fast the box, was posted after 100 or more all_reduces (at step 40 it could predate them).
        job.wait_for(r"\[rank 3\] step 200 ")
        node0 = job.node(0)
        box = _open(node0.launcher_pid)  # type: ignore[arg-type]
        t0 = time.monotonic()
        read = box.read_summaries()
        assert not isinstance(read, NA), read
        assert [p.rank for p in read.posts] == [0, 1, 2, 3] and read.silent_ranks == () and read.invalid == ()
        assert read.round_trips == 2  # one check, one multi_get
        assert {p.rank: p.node_rank for p in read.posts} == {0: 0, 1: 0, 2: 1, 3: 1}
        pids = {**job.node(0).ranks, **job.node(1).ranks}
        assert {p.rank: p.pid for p in read.posts} == pids  # node 1's processes, read through node 0's store
        assert not any(p.stale or p.final for p in read.posts)
        assert all(p.groups and (p.groups[0].last_completed or 0) > 20 for p in read.posts)
        stacks = box.gather_stacks()
        assert not isinstance(stacks, NA), stacks
        assert [a.rank for a in stacks.answers] == [0, 1, 2, 3] and stacks.silent_ranks == ()
        for answer in stacks.answers:
            main = next(t for t in answer.threads if t.name == "MainThread")
            assert any(f.function == "main" and f.file.endswith("train.py") for f in main.frames), main
        assert time.monotonic() - t0 < ANSWER_BOUND_S


def test_the_rank_on_node_1_that_never_enters_the_collective_is_named_from_node_0() -> None:
    with two_node_job("mn_missing_rank") as job:
        job.find_ranks()
        job.wait_for(r"\[rank 3\] step 20 ")
        time.sleep(6.0)  # rank 3 stops at step 25: let the others wait in the next all_reduce a while
        box = _open(job.node(0).launcher_pid)  # type: ignore[arg-type]
        t0 = time.monotonic()
        fr = box.gather_flight_recorder()
        assert not isinstance(fr, NA), fr
        assert [d.rank for d in fr.dumps] == [0, 1, 2, 3], fr.silent_ranks
        (group,) = match_flight_recorder(fr.dumps, world_size=4).groups
        pending = group.pending
        assert pending is not None and pending.missing_ranks == (3,) and pending.waiting_ranks == (0, 1, 2)
        assert pending.ref.op == "all_reduce" and (pending.waiting_since_s or 0.0) > 2.0
        # What the missing rank does instead, from its own stacks: it waits for the upload's acknowledgement.
        stacks = box.gather_stacks(ranks=[3])
        assert not isinstance(stacks, NA) and [a.rank for a in stacks.answers] == [3]
        main = next(t for t in stacks.answers[0].threads if t.name == "MainThread")
        names = [f.function for f in main.frames]  # innermost first; how deep the wait goes varies (Event, Condition)
        assert "save" in names and names[names.index("save") + 1] == "main", main.frames[:6]
        read = box.read_summaries()
        assert not isinstance(read, NA)
        current = {p.rank: p.coll_current for p in read.posts}
        assert current[3] is None and all(current[r] is not None and current[r].op == "all_reduce" for r in (0, 1, 2))
        assert time.monotonic() - t0 < ANSWER_BOUND_S
