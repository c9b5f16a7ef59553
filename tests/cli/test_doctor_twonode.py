"""`doctor` on either node of a real two-node job (tests/multinode_bed.py: two torchrun launchers, --nnodes 2, c10d
rendezvous on 127.0.0.1, two gloo ranks each, every rank under `dflash-diag run`), given one launcher's PID: the ranks
of the other node are read through the job's own store (docs/mailbox.md). A slow rank there is the straggler, not a
hang (the false critical this replaces); a rank there that never enters the collective is named with what its own
code does; a rank there that falls silent is the hang's cause; a healthy job gets no warning. The window's mailbox is
in the saved observation and the bundle, and judged the same offline. On the same jobs, the store reader itself
(sources/store.py): every rank's summary, stacks and Flight Recorder read from node 0's launcher PID alone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from multinode_bed import TwoNodeJob, two_node_job

from dflash_diag.analysis.flightrec import match_flight_recorder
from dflash_diag.model.common import NA
from dflash_diag.sources.store import Mailbox, open_mailbox

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
CLI = [sys.executable, "-m", "dflash_diag"]
WINDOW_S = "4"


def _env(job: TwoNodeJob) -> dict[str, str]:
    return {**os.environ, "DFLASH_DIAG_BOARD_DIR": str(job.work / "boards"), "PYTHONUNBUFFERED": "1"}


def _doctor(job: TwoNodeJob, node: int, *extra: str) -> tuple[dict[str, Any], float]:
    t0 = time.monotonic()
    out = subprocess.run([*CLI, "doctor", str(job.node(node).launcher_pid), "--json", "--duration", WINDOW_S, *extra],
                         env=_env(job), capture_output=True, text=True, timeout=180)
    took_s = time.monotonic() - t0
    assert out.stdout, f"doctor on node {node}: exit {out.returncode}: {out.stderr[-2000:]}\n{job.logs()}"
    return json.loads(out.stdout), took_s


def _rules(report: dict[str, Any], at_least: str = "warning") -> set[str]:
    order = ["info", "warning", "critical"]
    return {f["rule_id"] for f in report["findings"] if order.index(f["severity"]) >= order.index(at_least)}

# --- the store reader itself (sources/store.py), on the same jobs: a job start is the costly part of these tests ---

ANSWER_BOUND_S = 10.0  # the mailbox's part of "named within 10 s": read, ask, gather (torch's import aside)


def _open(pid: int) -> Mailbox:
    box = open_mailbox(pid)
    assert not isinstance(box, NA), box
    return box


def _reads_every_ranks_summary_and_stacks(job: TwoNodeJob) -> None:
    """From node 0's launcher PID alone, the reader joins the job's store and reads all four ranks, node 1's
    included: their summaries with one multi_get and their stacks on request."""
    # Step 200 is at least 4 s of training (each step sleeps 20 ms): a summary is posted every 2 s, so the latest
    # one, however fast the box, was posted after 100 or more all_reduces (at step 40 it could predate them).
    job.wait_for(r"\[rank 3\] step 200 ")
    box = _open(job.node(0).launcher_pid)  # type: ignore[arg-type]
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


def _names_the_rank_that_never_entered(job: TwoNodeJob) -> None:
    """Through node 0's store: every rank's Flight Recorder, the matcher naming rank 3 (node 1) as the one that
    never entered the all_reduce the others wait in, its own stack (waiting in save()), and the summaries."""
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



def test_a_slow_rank_on_the_other_node_is_the_straggler_from_either_node(tmp_path: Path) -> None:
    with two_node_job("mn_slow_rank") as job:
        job.find_ranks()
        job.wait_for(r"\[rank 3\] step 10 ")
        saved = tmp_path / "node0.json"
        for node in (0, 1):
            report, took_s = _doctor(job, node, *(["--save-observation", str(saved)] if node == 0 else []))
            head = report["headline"]
            assert head["rule_id"] == "rank-straggler", (node, head, took_s)
            assert head["text"].startswith("rank 3 ") and "is the straggler" in head["text"]
            if node == 0:  # seen only through the mailbox: its node and where its own code is, from its stack
                # One dump is a moment: mostly in batch()'s slow read, now and then in main's all_reduce (the fresh
                # clone's CI caught it there once under the three workers' load).
                assert head["text"].startswith("rank 3 (node 1") and "(train.py:" in head["text"], head["text"]
            assert "collective-hang" not in _rules(report)  # the ranks here wait all window: the job still trains
        replayed = subprocess.run([*CLI, "doctor", "--replay", str(saved), "--json"], capture_output=True, text=True,
                                  timeout=120)
        assert replayed.returncode == 0, replayed.stderr
        assert json.loads(replayed.stdout)["headline"]["rule_id"] == "rank-straggler"
        assert '"flight_recorder"' in saved.read_text()  # the window's mailbox, every rank's dump in it


def test_the_rank_elsewhere_that_never_enters_is_named_and_the_bundle_carries_every_dump(tmp_path: Path) -> None:
    with two_node_job("mn_missing_rank") as job:
        job.find_ranks()
        job.wait_for(r"\[rank 3\] step 20 ")
        time.sleep(7.0)  # rank 3 stops at step 25 (its upload is never acknowledged): the others wait in all_reduce
        _names_the_rank_that_never_entered(job)
        report, took_s = _doctor(job, 0)
        head = report["headline"]
        assert head["rule_id"] == "collective-hang" and head["severity"] == "critical", (head, took_s)
        assert "rank 3 (node 1" in head["text"] and "never entered it" in head["text"]
        assert "save (train.py:" in head["text"]  # what rank 3's own code does instead: waits in save()
        bundle = tmp_path / "node1.tar.gz"
        snap = subprocess.run([*CLI, "snapshot", str(job.node(1).launcher_pid), "-o", str(bundle), "--duration",
                               WINDOW_S], env=_env(job), capture_output=True, text=True, timeout=180)
        assert snap.returncode == 0, snap.stderr
        with tarfile.open(bundle) as tar:
            name = next(m.name for m in tar.getmembers() if m.name.endswith("observation.json"))
            doc = json.loads(tar.extractfile(name).read())  # type: ignore[union-attr]
        dumps = doc["observation"]["mailbox"]["flight_recorder"]["dumps"]
        assert sorted(d["rank"] for d in dumps) == [0, 1, 2, 3]
        offline = subprocess.run([*CLI, "doctor", str(bundle), "--json"], capture_output=True, text=True, timeout=120)
        assert offline.returncode == 0, offline.stderr
        assert json.loads(offline.stdout)["headline"]["rule_id"] == "collective-hang"


def test_a_healthy_job_is_quiet_and_a_rank_that_falls_silent_there_is_the_cause() -> None:
    with two_node_job("mn_healthy") as job:
        job.find_ranks()
        _reads_every_ranks_summary_and_stacks(job)
        report, _ = _doctor(job, 0)
        # The job's rules say nothing of a healthy job, and nothing is critical. (A rank's own rules may note the
        # machine: on a starved two-core box a rank's threads wait for the GIL behind descheduled holders.)
        assert not _rules(report) & {"collective-hang", "rank-straggler", "rank-died", "collective-mismatch"}, \
            report["findings"]
        assert _rules(report, "critical") == set(), report["findings"]
        frozen = job.node(1).ranks[3]
        os.kill(frozen, signal.SIGSTOP)  # a node that freezes: no reset reaches its peers, they wait
        try:
            time.sleep(8.0)
            from_node0, took_s = _doctor(job, 0)
            from_node1, _ = _doctor(job, 1)
        finally:
            os.kill(frozen, signal.SIGCONT)
        head = from_node0["headline"]  # seen only through the mailbox: silent, answering nothing
        assert head["rule_id"] == "collective-hang" and "rank-died" in head["because"], (head, took_s)
        assert "rank 3 (node 1" in head["text"] and "answered no request" in head["text"]
        head = from_node1["headline"]  # on its own node the process is there to look at: what /proc says, not a guess
        if head["rule_id"] == "process-stopped":  # the rank's own finding leads (its state T, read here)
            assert f"kill -CONT {frozen}" in head["remedy"], head
        else:  # the job's hang, its cause the stopped rank as /proc shows it
            assert head["rule_id"] == "collective-hang" and "rank-died" in head["because"], head
            assert "on this machine its process is stopped" in head["text"] and f"PID {frozen}" in head["text"], head
