"""The job across nodes, judged from real mailbox windows (tests/fixtures/mailbox/record.py: two torchrun launchers,
--nnodes 2, gloo, two ranks each, every rank under `dflash-diag run`, read from node 0's launcher): every value
parsed by the real parsers, as a window reads it, then judged by ``analysis.mailbox`` and said by the job rules."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from dflash_diag.analysis import analyse
from dflash_diag.analysis.findings import crossnode
from dflash_diag.analysis.mailbox import judge_mailbox
from dflash_diag.model.job import JobAnalysis, JobObservation
from dflash_diag.model.mailbox import (
    FrGathered,
    MailboxRead,
    MailboxVerdict,
    MailboxWindow,
    StacksGathered,
    StoreAddress,
)
from dflash_diag.observe.codec import encode_observation, read_observation
from dflash_diag.sources.mailbox import parse_flight_recorder, parse_stacks, parse_summary

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "mailbox"


def _ranked(folder: Path) -> dict[int, bytes]:
    return {int(p.stem[4:]): p.read_bytes() for p in sorted(folder.glob("rank*.json"))}


def _read(address: StoreAddress, folder: Path, wall_s: float) -> MailboxRead:
    posts = tuple(parse_summary(data, rank=r, read_wall_s=wall_s) for r, data in sorted(_ranked(folder).items()))
    present = {p.rank for p in posts}
    return MailboxRead(address=address, read_wall_s=wall_s, elapsed_ms=1.0, posts=posts,
                       silent_ranks=tuple(r for r in range(address.world_size) if r not in present), invalid=(),
                       round_trips=2)


def window(scenario: str) -> MailboxWindow:
    base = FIXTURES / scenario
    meta = json.loads((base / "meta.json").read_text())
    a = meta["address"]
    address = StoreAddress(host=a["host"], port=a["port"], world_size=a["world_size"], from_pid=1)
    fr = _ranked(base / "flightrec")
    stacks = _ranked(base / "stacks")
    world = range(address.world_size)
    return MailboxWindow(
        address=address,
        first=_read(address, base / "first", meta["first_read_wall_s"]),
        last=_read(address, base / "last", meta["last_read_wall_s"]),
        flight_recorder=FrGathered(request_id=1, elapsed_ms=1.0,
                                   dumps=tuple(parse_flight_recorder(d, rank=r) for r, d in sorted(fr.items())),
                                   silent_ranks=tuple(r for r in world if r not in fr), invalid=()),
        stacks=StacksGathered(request_id=2, elapsed_ms=1.0,
                              answers=tuple(parse_stacks(d, rank=r) for r, d in sorted(stacks.items())),
                              silent_ranks=tuple(r for r in world if r not in stacks), invalid=()))


def _rules(v: MailboxVerdict) -> list[str]:
    found = [crossnode.died_finding(v, hung=v.hang is not None), crossnode.hang_finding(v),
             crossnode.straggler_finding(v)]
    return [f.rule_id for f in found if f is not None]


def test_a_healthy_job_moves_and_nothing_is_said() -> None:
    v = judge_mailbox(window("healthy"))
    assert v.job_moved and v.hang is None and v.straggler is None and v.dead_ranks == ()
    assert [r.rank for r in v.ranks] == [0, 1, 2, 3] and {r.node_rank for r in v.ranks} == {0, 1}
    assert all(r.wait_share is not None and r.wait_share < 0.5 for r in v.ranks)
    assert _rules(v) == []


def test_the_slow_rank_on_the_other_node_is_the_straggler() -> None:
    v = judge_mailbox(window("slow_rank"))
    assert v.hang is None and v.dead_ranks == ()
    assert v.straggler is not None and v.straggler.rank == 3 and v.straggler.others == (0, 1, 2)
    assert v.straggler.others_wait_share > 0.6 and v.straggler.wait_share < 0.2
    finding = crossnode.straggler_finding(v)
    assert finding is not None and finding.claim.startswith("rank 3 (node 1")
    assert "batch (train.py:" in finding.claim  # where its time goes: its own code, not torch's or the probes'


def test_the_rank_that_never_enters_the_collective_is_named_with_what_it_does() -> None:
    v = judge_mailbox(window("missing_rank"))
    assert not v.job_moved and v.straggler is None and v.dead_ranks == ()
    assert v.hang is not None and v.hang.missing_ranks == (3,) and v.hang.waiting_ranks == (0, 1, 2)
    assert v.hang.op == "all_reduce" and v.hang.waiting_since_s >= 5.0
    finding = crossnode.hang_finding(v)
    assert finding is not None and finding.severity.name == "CRITICAL"
    assert "rank 3 (node 1" in finding.claim and "never entered it" in finding.claim
    assert "save (train.py:" in finding.claim  # it waits for the upload's acknowledgement in save()


def test_a_frozen_rank_is_silent_and_the_others_wait_for_it() -> None:
    v = judge_mailbox(window("frozen_rank"))
    assert v.dead_ranks == (3,) and not v.job_moved
    assert v.hang is not None and v.hang.silent_ranks == (3,) and v.hang.waiting_ranks == (0, 1, 2)
    assert _rules(v) == ["rank-died", "collective-hang"]
    died = crossnode.died_finding(v, hung=True)
    assert died is not None and "rank 3 (node 1" in died.claim and "answered no request" in died.claim


def test_ranks_that_called_different_collectives_at_one_sequence_number_are_a_hang_named_by_the_mismatch() -> None:
    """Every rank entered #seq, rank 3 with a broadcast where the others all_reduce: nobody is missing, nobody
    completes. Without the mismatch there is no rank to blame and the hang would go unsaid."""
    v = judge_mailbox(window("mismatch_op"))
    assert not v.job_moved and v.straggler is None and v.dead_ranks == ()
    assert v.hang is not None and v.hang.missing_ranks == () and v.hang.silent_ranks == ()
    assert dict(v.hang.mismatched) == {"all_reduce": (0, 1, 2), "broadcast": (3,)}
    finding = crossnode.hang_finding(v)
    assert finding is not None and finding.severity.name == "CRITICAL"
    assert "called different collectives" in finding.claim
    assert "ranks 0, 1, 2 in all_reduce, rank 3 in broadcast" in finding.claim


def test_a_rank_waiting_in_one_call_all_window_counts_as_waiting() -> None:
    """The probe adds a call's time when it returns: the call a rank is in is counted up to the post."""
    w = window("slow_rank")
    assert isinstance(w.last, MailboxRead) and isinstance(w.first, MailboxRead)
    v = judge_mailbox(w)
    waiting = [r for r in v.ranks if r.rank != 3]
    assert all(r.wait_share is not None and r.wait_share > 0.6 for r in waiting)


def test_a_job_that_moved_is_never_called_hung_even_with_a_long_pending_collective() -> None:
    w = window("slow_rank")
    v = judge_mailbox(w)
    assert v.job_moved and v.hang is None
    assert crossnode.judged(v)


@pytest.mark.parametrize("part", ["first", "last", "flight_recorder", "stacks"])
def test_a_part_that_could_not_be_read_is_a_note_not_a_claim(part: str) -> None:
    w = replace(window("missing_rank"), **{part: "cannot join the job's store at 127.0.0.1:1: refused"})
    v = judge_mailbox(w)
    assert any("refused" in n for n in v.notes)
    if part == "flight_recorder":
        assert v.hang is None  # no dumps: no matching, no claim of a hang from the mailbox
    if part == "last":
        assert v.straggler is None and v.dead_ranks == ()


def test_a_rank_that_never_posted_is_not_called_dead() -> None:
    """Its probes may not run, or could not reach the store: nothing says it stopped (a false critical otherwise)."""
    w = window("missing_rank")
    assert isinstance(w.first, MailboxRead) and isinstance(w.last, MailboxRead)
    without = {"first": replace(w.first, posts=w.first.posts[1:], silent_ranks=(0,)),
               "last": replace(w.last, posts=w.last.posts[1:], silent_ranks=(0,))}
    assert isinstance(w.flight_recorder, FrGathered) and isinstance(w.stacks, StacksGathered)
    w = replace(w, **without, flight_recorder=replace(w.flight_recorder, dumps=w.flight_recorder.dumps[1:]),
                stacks=replace(w.stacks, answers=w.stacks.answers[1:]))
    v = judge_mailbox(w)
    assert v.dead_ranks == () and any("rank 0 never posted" in n for n in v.notes)
    assert v.hang is not None and v.hang.missing_ranks == (3,) and v.hang.silent_ranks == ()


# --- in the job's analysis: the mailbox read beside the ranks sampled here -------------------------------------


def _job_with(mailbox: MailboxWindow | str, local: str = "ddp_healthy") -> JobObservation:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from job_fixtures import load_job

    return replace(load_job(local), mailbox=mailbox)


def test_the_job_report_leads_with_the_rank_elsewhere_that_never_entered() -> None:
    report = analyse(_job_with(window("missing_rank")))
    assert isinstance(report, JobAnalysis) and report.headline is not None
    assert report.headline.rule_id == "collective-hang" and report.headline.severity.name == "CRITICAL"
    assert "rank 3 (node 1" in report.headline.text and "never entered it" in report.headline.text


def test_ranks_here_waiting_all_window_are_not_a_hang_when_the_job_moved_elsewhere() -> None:
    """The false critical of a two-node job whose slow rank ran on the node the tool could not see: the ranks here
    wait in all_reduce the whole window, the mailbox shows every rank completing collectives: a straggler."""
    alone = analyse(_job_with("not read", local="ddp_rank0_barrier"))
    assert "collective-hang" in {f.rule_id for f in alone.findings}  # without the mailbox: what was seen here
    report = analyse(_job_with(window("slow_rank"), local="ddp_rank0_barrier"))
    rules = {f.rule_id for f in report.findings}
    assert "collective-hang" not in rules and "rank-straggler" in rules
    straggler = next(f for f in report.findings if f.rule_id == "rank-straggler")
    assert straggler.claim.startswith("rank 3 (node 1")


def test_the_job_report_leads_with_the_mismatched_collective() -> None:
    report = analyse(_job_with(window("mismatch_op")))
    assert report.headline is not None and report.headline.rule_id == "collective-hang"
    assert "rank 3 in broadcast" in report.headline.text


def test_a_frozen_rank_elsewhere_is_the_cause_the_hang_its_symptom() -> None:
    report = analyse(_job_with(window("frozen_rank")))
    assert report.headline is not None and report.headline.rule_id == "collective-hang"
    assert report.headline.because == ("rank-died",) and "rank 3 (node 1" in report.headline.text
    assert {"rank-died", "collective-hang"} <= {f.rule_id for f in report.findings}


@pytest.mark.parametrize("scenario", ["healthy", "slow_rank", "missing_rank", "frozen_rank", "mismatch_op"])
def test_a_job_observation_with_its_mailbox_round_trips_and_is_judged_the_same(scenario: str) -> None:
    job = _job_with(window(scenario))
    copy = read_observation(encode_observation(job, tool_version="test"))
    assert copy == job
    assert analyse(copy) == analyse(job)


def test_a_healthy_job_with_a_healthy_mailbox_warns_of_nothing() -> None:
    report = analyse(_job_with(window("healthy")))
    assert report.healthy, [f.claim for f in report.findings]


def test_the_report_shows_every_node_and_the_flight_recorders_matching() -> None:
    from dflash_diag.view.doctor import doctor_doc, doctor_lines

    doc = doctor_doc(analyse(_job_with(window("missing_rank"))))
    nodes = doc["job"]["nodes"]  # type: ignore[index]
    assert [r["rank"] for r in nodes["ranks"]] == [0, 1, 2, 3] and [r["node"] for r in nodes["ranks"]] == [0, 0, 1, 1]
    (group,) = nodes["flight_recorder"]["groups"]
    assert group["pending"]["missing"] == [3] and group["pending"]["waiting"] == [0, 1, 2]
    text = "\n".join("".join(s.text for s in line.spans) for line in doctor_lines(doc))
    assert "every node (the job's store at" in text and "never entered [3]" in text
    json.dumps(doc)  # plain JSON


def test_a_mailbox_that_could_not_be_read_is_said_in_the_report() -> None:
    from dflash_diag.view.doctor import doctor_doc

    doc = doctor_doc(analyse(_job_with("cannot join the job's store at 10.0.0.1:29500: refused")))
    assert doc["job"]["nodes"] == {"na": "cannot join the job's store at 10.0.0.1:29500: refused"}  # type: ignore[index]
