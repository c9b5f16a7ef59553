"""sources/mailbox.py: what another process wrote to the job's store is checked and bounded before it becomes a
model value. A post that breaks the contract in any way is refused with one line saying what; a secret that a writer
left in a string is redacted here again; nothing is unpickled or evaluated."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from dflash_contract import mailbox as mb
from dflash_contract.mailbox import AnswerKeys, EntryKeys, SummaryKeys, ThreadKeys
from dflash_diag.sources.mailbox import (
    MailboxFormatError,
    answer_request_id,
    parse_flight_recorder,
    parse_stacks,
    parse_summary,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "flightrec"
SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def _summary(**changes: object) -> bytes:
    doc = {SummaryKeys.SCHEMA: mb.SUMMARY_SCHEMA, SummaryKeys.RANK: 2, SummaryKeys.POSTS: 1,
           SummaryKeys.POSTED_WALL_S: 1000.0, SummaryKeys.INTERVAL_S: 2.0,
           SummaryKeys.THREADS: [{ThreadKeys.NAME: "MainThread", ThreadKeys.TID: 5, ThreadKeys.CPU_SHARE: 0.5,
                                  ThreadKeys.WHERE: "step (train.py:4)"}]}
    doc.update(changes)
    return json.dumps(doc).encode()


def test_a_good_summary_reads_and_its_age_is_the_readers_clock_minus_the_post() -> None:
    post = parse_summary(_summary(), rank=2, read_wall_s=1003.5)
    assert post.rank == 2 and post.age_s == 3.5 and post.threads[0].where == "step (train.py:4)" and not post.stale
    assert parse_summary(_summary(), rank=2, read_wall_s=1011.0).stale


@pytest.mark.parametrize(("data", "why"), [
    (b"\x80\x81", "not strict JSON"),
    (b"[1, 2]", "not a JSON object"),
    (b'{"schema": "dflash-diag.mailbox-summary/1", "rank": 2, "posted_wall_s": NaN}', "not strict JSON"),
    (b'{"schema": "dflash-diag.mailbox-summary/1", "rank": 2, "posted_wall_s": 1e999}', "not strict JSON"),
    (b"[" * 50 + b"]" * 50, "not strict JSON"),
    (_summary(**{SummaryKeys.SCHEMA: "dflash-diag.mailbox-summary/9"}), "schema"),
    (_summary(**{SummaryKeys.RANK: 3}), "names rank 3"),
    (_summary(**{SummaryKeys.RANK: True}), "rank is not an integer"),
    (_summary(**{SummaryKeys.POSTS: "7"}), "posts is not an integer"),
    (_summary(**{SummaryKeys.GIL_SHARE: 7.0}), "gil_share is not a number in"),
    (_summary(**{SummaryKeys.THREADS: {"a": 1}}), "threads is not a list of objects"),
    (_summary(**{SummaryKeys.THREADS: [{ThreadKeys.NAME: 5}]}), "name is not a string"),
    (_summary(**{SummaryKeys.GROUPS: [{"pg_id": "0", "ranks": [0, -1]}]}), "ranks are not a list of ranks"),
    (_summary(**{SummaryKeys.FINAL: "yes"}), "final is not a boolean"),
    (_summary(**{SummaryKeys.HOST: "x" * (mb.MAX_SUMMARY_BYTES + 1)}), "over the"),
])
def test_a_summary_that_breaks_the_contract_is_refused_with_the_reason(data: bytes, why: str) -> None:
    with pytest.raises(MailboxFormatError, match=why):
        parse_summary(data, rank=2, read_wall_s=time.time())


def test_strings_are_bounded_and_redacted_again() -> None:
    post = parse_summary(_summary(**{SummaryKeys.HOST: "h" * 1000,
                                     SummaryKeys.THREADS: [{ThreadKeys.NAME: f"upload {SECRET}"}]}),
                         rank=2, read_wall_s=1000.0)
    assert len(post.host) == 255 and SECRET not in post.threads[0].name


def _stacks(**changes: object) -> bytes:
    doc = {AnswerKeys.SCHEMA: mb.ANSWER_SCHEMA, AnswerKeys.KIND: mb.KIND_STACKS, AnswerKeys.RANK: 1,
           AnswerKeys.REQUEST_ID: 4, AnswerKeys.ANSWERED_WALL_S: 5.0,
           AnswerKeys.THREADS: [{ThreadKeys.NAME: "MainThread", ThreadKeys.TID: 9, ThreadKeys.DAEMON: False,
                                 ThreadKeys.FRAMES: [["wait", f"/home/u/{SECRET}/t.py", 3], ["main", "t.py", 9]]}]}
    doc.update(changes)
    return json.dumps(doc).encode()


def test_a_stacks_answer_reads_and_refuses_what_is_not_one() -> None:
    answer = parse_stacks(_stacks(), rank=1)
    assert answer.request_id == 4 and [f.function for f in answer.threads[0].frames] == ["wait", "main"]
    assert SECRET not in answer.threads[0].frames[0].file and answer_request_id(_stacks()) == 4
    for bad, why in ((_stacks(**{AnswerKeys.KIND: mb.KIND_FLIGHTREC}), "kind"), (_stacks(**{AnswerKeys.RANK: 0}),
                     "names rank 0"), (_stacks(**{AnswerKeys.THREADS: [{ThreadKeys.NAME: "t", ThreadKeys.FRAMES:
                                                                         [["f", "x.py"]]}]}), "frame is not")):
        with pytest.raises(MailboxFormatError, match=why):
            parse_stacks(bad, rank=1)


def test_a_recorded_flight_recorder_answer_reads_and_a_tampered_one_does_not() -> None:
    data = (FIXTURES / "missing_rank" / "rank0.json").read_bytes()
    dump = parse_flight_recorder(data, rank=0)
    assert dump.na is None and dump.version and dump.entries and dump.entries[-1].op == "all_reduce"
    doc = json.loads(data)
    doc[AnswerKeys.ENTRIES][0][EntryKeys.INPUT_SIZES] = [["577"]]
    with pytest.raises(MailboxFormatError, match="input_sizes is not a list of shapes"):
        parse_flight_recorder(json.dumps(doc).encode(), rank=0)
    with pytest.raises(MailboxFormatError, match="names rank 0"):
        parse_flight_recorder(data, rank=1)
