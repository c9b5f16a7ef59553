"""Parsing what the ranks wrote to a job's mailbox (dflash_contract.mailbox) into the model's frozen values.

Other processes wrote these bytes, possibly another version of the probes, possibly anyone who can reach the
store (it is not authenticated): every value is checked for its type and bounded (sizes, list lengths, string
lengths); a document that breaks the contract raises :class:`MailboxFormatError` with one line saying what is
wrong, and the caller reports that rank's answer as invalid. Nothing is unpickled, nothing is evaluated.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from dflash_contract import mailbox as mb
from dflash_contract.board import loads_strict
from dflash_contract.mailbox import AnswerKeys, EntryKeys, GroupKeys, QueueRowKeys, SummaryKeys, ThreadKeys
from dflash_contract.redact import redact_text
from dflash_diag.model.mailbox import (
    CollectiveNow,
    FrDump,
    FrEntry,
    GroupSeq,
    QueueRow,
    RankPost,
    StackFrame,
    StacksAnswer,
    ThreadRow,
    ThreadStack,
)

MAX_DEPTH = 12  # the writer's documents nest 5 deep
MAX_INT = 1 << 62


class MailboxFormatError(ValueError):
    """A mailbox value that breaks the contract; the message says what (one line)."""


def _doc(data: bytes, limit: int, schema: str) -> Mapping[str, Any]:
    if len(data) > limit:
        raise MailboxFormatError(f"{len(data)} bytes, over the {limit} a writer may post")
    try:
        doc = loads_strict(data, max_depth=MAX_DEPTH)
    except ValueError as exc:
        raise MailboxFormatError(f"not strict JSON: {exc}"[:200]) from None
    if not isinstance(doc, dict):
        raise MailboxFormatError("not a JSON object")
    if doc.get(SummaryKeys.SCHEMA) != schema:
        raise MailboxFormatError(f"schema {str(doc.get(SummaryKeys.SCHEMA))[:60]!r}, expected {schema!r}")
    return doc


def _int(doc: Mapping[str, Any], key: str, *, low: int = -1, high: int = MAX_INT, optional: bool = True) -> int | None:
    value = doc.get(key)
    if value is None and optional:
        return None
    if type(value) is not int or not low <= value <= high:
        raise MailboxFormatError(f"{key} is not an integer in [{low}, {high}]")
    return value


def _float(doc: Mapping[str, Any], key: str, *, optional: bool = True, low: float = -math.inf,
           high: float = math.inf) -> float | None:
    value = doc.get(key)
    if value is None and optional:
        return None
    if type(value) not in (int, float) or not math.isfinite(value) or not low <= value <= high:
        raise MailboxFormatError(f"{key} is not a number in [{low}, {high}]")
    return float(value)


def _text(doc: Mapping[str, Any], key: str, *, optional: bool = True, limit: int = mb.MAX_TEXT_CHARS) -> str | None:
    value = doc.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise MailboxFormatError(f"{key} is not a string")
    # Redacted again here: a writer of another version (or anyone with access to the store) may not have.
    return redact_text(value[:limit])


def _bool(doc: Mapping[str, Any], key: str) -> bool:
    value = doc.get(key, False)
    if not isinstance(value, bool):
        raise MailboxFormatError(f"{key} is not a boolean")
    return value


def _rows(doc: Mapping[str, Any], key: str, limit: int) -> list[Mapping[str, Any]]:
    value = doc.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise MailboxFormatError(f"{key} is not a list of objects")
    return value[:limit]


def _group(row: Mapping[str, Any]) -> GroupSeq:
    ranks = row.get(GroupKeys.RANKS)
    if ranks is not None and (not isinstance(ranks, list) or len(ranks) > mb.MAX_RANKS
                              or not all(type(r) is int and 0 <= r < mb.MAX_RANKS for r in ranks)):
        raise MailboxFormatError("a group's ranks are not a list of ranks")
    return GroupSeq(
        pg_id=_text(row, GroupKeys.PG_ID, optional=False, limit=64) or "",
        name=_text(row, GroupKeys.NAME, limit=64),
        desc=_text(row, GroupKeys.DESC, limit=64),
        ranks=tuple(ranks) if ranks is not None else None,
        last_enqueued=_int(row, GroupKeys.LAST_ENQUEUED),
        last_started=_int(row, GroupKeys.LAST_STARTED),
        last_completed=_int(row, GroupKeys.LAST_COMPLETED),
    )


def parse_summary(data: bytes, *, rank: int, read_wall_s: float) -> RankPost:
    """A rank's summary; MailboxFormatError when it breaks the contract or names another rank than its key."""
    doc = _doc(data, mb.MAX_SUMMARY_BYTES, mb.SUMMARY_SCHEMA)
    if _int(doc, SummaryKeys.RANK, low=0, high=mb.MAX_RANKS, optional=False) != rank:
        raise MailboxFormatError(f"the summary under rank {rank}'s key names rank {doc.get(SummaryKeys.RANK)!r}")
    posted = _float(doc, SummaryKeys.POSTED_WALL_S, optional=False, low=0.0) or 0.0
    current = doc.get(SummaryKeys.COLL_CURRENT)
    if current is not None and not isinstance(current, dict):
        raise MailboxFormatError(f"{SummaryKeys.COLL_CURRENT} is not an object")
    return RankPost(
        rank=rank,
        world_size=_int(doc, SummaryKeys.WORLD_SIZE, low=1, high=mb.MAX_RANKS),
        local_rank=_int(doc, SummaryKeys.LOCAL_RANK, low=0, high=mb.MAX_RANKS),
        node_rank=_int(doc, SummaryKeys.NODE_RANK, low=0, high=mb.MAX_RANKS),
        host=_text(doc, SummaryKeys.HOST, limit=255) or "",
        pid=_int(doc, SummaryKeys.PID, low=1, high=1 << 31),
        posts=_int(doc, SummaryKeys.POSTS, low=0, optional=False) or 0,
        posted_wall_s=posted,
        interval_s=_float(doc, SummaryKeys.INTERVAL_S, optional=False, low=0.01, high=3600.0) or 2.0,
        final=_bool(doc, SummaryKeys.FINAL),
        age_s=read_wall_s - posted,
        step=_int(doc, SummaryKeys.STEP, low=-MAX_INT),
        steps=_int(doc, SummaryKeys.STEPS, low=0),
        last_step_wall_s=_float(doc, SummaryKeys.LAST_STEP_WALL_S, low=0.0),
        optimizer_steps=_int(doc, SummaryKeys.OPTIMIZER_STEPS, low=0),
        coll_entered=_int(doc, SummaryKeys.COLL_ENTERED, low=0),
        coll_completed=_int(doc, SummaryKeys.COLL_COMPLETED, low=0),
        coll_current=None if current is None else CollectiveNow(
            seq=_int(current, SummaryKeys.SEQ, low=0), op=_text(current, SummaryKeys.OP, limit=40) or "",
            thread=_text(current, SummaryKeys.THREAD, limit=80) or "",
            since_wall_s=_float(current, SummaryKeys.SINCE_WALL_S, low=0.0)),
        groups=tuple(_group(r) for r in _rows(doc, SummaryKeys.GROUPS, mb.MAX_GROUPS)),
        groups_na=_text(doc, SummaryKeys.GROUPS_NA),
        gil_share=_float(doc, SummaryKeys.GIL_SHARE, low=0.0, high=1.0),
        gpu_busy_pct=_float(doc, SummaryKeys.GPU_BUSY_PCT, low=0.0, high=100.0),
        threads=tuple(ThreadRow(name=_text(r, ThreadKeys.NAME, optional=False) or "",
                                tid=_int(r, ThreadKeys.TID, low=0, high=1 << 31),
                                cpu_share=_float(r, ThreadKeys.CPU_SHARE, low=0.0, high=1e3),
                                where=_text(r, ThreadKeys.WHERE))
                      for r in _rows(doc, SummaryKeys.THREADS, mb.MAX_THREADS)),
        queues=tuple(QueueRow(name=_text(r, QueueRowKeys.NAME, optional=False) or "",
                              depth=_int(r, QueueRowKeys.DEPTH, low=0), maxsize=_int(r, QueueRowKeys.MAXSIZE))
                     for r in _rows(doc, SummaryKeys.QUEUES, mb.MAX_QUEUES)),
        requests_answered=_int(doc, SummaryKeys.REQUESTS_ANSWERED, low=0) or 0,
        coll_in_s=_float(doc, SummaryKeys.COLL_IN_S, low=0.0, high=1e9),
    )


def _answer_head(data: bytes, kind: str, rank: int) -> tuple[Mapping[str, Any], int, float]:
    doc = _doc(data, mb.MAX_ANSWER_BYTES, mb.ANSWER_SCHEMA)
    if doc.get(AnswerKeys.KIND) != kind:
        raise MailboxFormatError(f"an answer of kind {str(doc.get(AnswerKeys.KIND))[:30]!r} under a {kind} key")
    if _int(doc, AnswerKeys.RANK, low=0, high=mb.MAX_RANKS, optional=False) != rank:
        raise MailboxFormatError(f"the answer under rank {rank}'s key names rank {doc.get(AnswerKeys.RANK)!r}")
    request_id = _int(doc, AnswerKeys.REQUEST_ID, low=0, optional=False) or 0
    answered = _float(doc, AnswerKeys.ANSWERED_WALL_S, optional=False, low=0.0) or 0.0
    return doc, request_id, answered


def answer_request_id(data: bytes) -> int | None:
    """The request an answer is for, read cheaply (before the whole answer is parsed); None when unreadable."""
    try:
        doc = loads_strict(data[: mb.MAX_ANSWER_BYTES], max_depth=MAX_DEPTH)
    except ValueError:
        return None
    value = doc.get(AnswerKeys.REQUEST_ID) if isinstance(doc, dict) else None
    return value if type(value) is int else None


def parse_stacks(data: bytes, *, rank: int) -> StacksAnswer:
    doc, request_id, answered = _answer_head(data, mb.KIND_STACKS, rank)
    threads = []
    for row in _rows(doc, AnswerKeys.THREADS, mb.MAX_THREADS):
        frames = row.get(ThreadKeys.FRAMES)
        if not isinstance(frames, list):
            raise MailboxFormatError("a thread's frames are not a list")
        parsed = []
        for frame in frames[: mb.MAX_FRAMES]:
            if not (isinstance(frame, list) and len(frame) == 3 and isinstance(frame[0], str)
                    and isinstance(frame[1], str) and (frame[2] is None or type(frame[2]) is int)):
                raise MailboxFormatError("a frame is not [function, file, line]")
            parsed.append(StackFrame(function=redact_text(frame[0][: mb.MAX_TEXT_CHARS]),
                                     file=redact_text(frame[1][: mb.MAX_TEXT_CHARS]), line=frame[2]))
        daemon = row.get(ThreadKeys.DAEMON)
        threads.append(ThreadStack(name=_text(row, ThreadKeys.NAME, optional=False) or "",
                                   tid=_int(row, ThreadKeys.TID, low=0, high=1 << 31),
                                   daemon=daemon if isinstance(daemon, bool) else None,
                                   frames=tuple(parsed), truncated=_bool(row, ThreadKeys.FRAMES_TRUNCATED)))
    return StacksAnswer(rank=rank, request_id=request_id, answered_wall_s=answered,
                        cost_ms=_float(doc, AnswerKeys.COST_MS, low=0.0), threads=tuple(threads),
                        truncated=_bool(doc, AnswerKeys.TRUNCATED), na=_text(doc, AnswerKeys.NA))


def _sizes(row: Mapping[str, Any], key: str) -> tuple[tuple[int, ...], ...]:
    value = row.get(key) or []
    if not isinstance(value, list) or not all(isinstance(s, list) and all(type(d) is int for d in s) for s in value):
        raise MailboxFormatError(f"{key} is not a list of shapes")
    return tuple(tuple(s[:16]) for s in value[:64])


def _dtypes(row: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = row.get(key) or []
    if not isinstance(value, list) or not all(isinstance(d, str) for d in value):
        raise MailboxFormatError(f"{key} is not a list of dtype names")
    return tuple(d[:24] for d in value[:64])


def _entry(row: Mapping[str, Any]) -> FrEntry:
    return FrEntry(
        record_id=_int(row, EntryKeys.RECORD_ID, low=0),
        pg_id=_int(row, EntryKeys.PG_ID, low=0),
        pg_name=_text(row, EntryKeys.PG_NAME, limit=64) or "",
        pg_desc=_text(row, EntryKeys.PG_DESC, limit=64) or "",
        collective_seq_id=_int(row, EntryKeys.COLLECTIVE_SEQ_ID, low=0),
        p2p_seq_id=_int(row, EntryKeys.P2P_SEQ_ID, low=0),
        op_id=_int(row, EntryKeys.OP_ID, low=0),
        is_p2p=_bool(row, EntryKeys.IS_P2P),
        profiling_name=_text(row, EntryKeys.PROFILING_NAME, limit=80) or "",
        input_sizes=_sizes(row, EntryKeys.INPUT_SIZES),
        input_dtypes=_dtypes(row, EntryKeys.INPUT_DTYPES),
        output_sizes=_sizes(row, EntryKeys.OUTPUT_SIZES),
        output_dtypes=_dtypes(row, EntryKeys.OUTPUT_DTYPES),
        state=_text(row, EntryKeys.STATE, limit=16) or "",
        retired=_bool(row, EntryKeys.RETIRED),
        time_created_ns=_int(row, EntryKeys.TIME_CREATED_NS, low=0),
        time_started_ns=_int(row, EntryKeys.TIME_STARTED_NS, low=0),
        time_completed_ns=_int(row, EntryKeys.TIME_COMPLETED_NS, low=0),
        timeout_ms=_int(row, EntryKeys.TIMEOUT_MS, low=0),
        thread_name=_text(row, EntryKeys.THREAD_NAME, limit=80) or "",
    )


def parse_flight_recorder(data: bytes, *, rank: int) -> FrDump:
    doc, request_id, answered = _answer_head(data, mb.KIND_FLIGHTREC, rank)
    return FrDump(
        rank=rank, request_id=request_id, answered_wall_s=answered,
        dump_wall_ns=_int(doc, AnswerKeys.DUMP_WALL_NS, low=0),
        cost_ms=_float(doc, AnswerKeys.COST_MS, low=0.0),
        version=_text(doc, AnswerKeys.FR_VERSION, limit=16),
        groups=tuple(_group(r) for r in _rows(doc, AnswerKeys.GROUPS, mb.MAX_GROUPS)),
        entries=tuple(_entry(r) for r in _rows(doc, AnswerKeys.ENTRIES, mb.MAX_FR_ENTRIES)),
        entries_total=_int(doc, AnswerKeys.ENTRIES_TOTAL, low=0) or 0,
        truncated=_bool(doc, AnswerKeys.TRUNCATED),
        na=_text(doc, AnswerKeys.NA),
    )
