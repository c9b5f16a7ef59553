"""mailbox: this rank's summary posted to the job's own c10d store, and answers to the tool's requests there.

In a process that runs torch.distributed with a TCPStore (torchrun's agent store, or rank 0's with ``env://``),
a daemon thread of its own opens a second connection to that store (the host and port of the job's default
store, else ``MASTER_ADDR``/``MASTER_PORT``) and, under ``dflash-diag/v1/`` (dflash_contract.mailbox):

- posts every ``post_interval_s`` a summary of this rank: its step, torch's Flight Recorder sequence numbers per
  process group (last enqueued, started, completed: ``_dump_fr_trace`` without the entries, ~20 us), the
  collective a thread is in, each thread's CPU share and innermost frame, the GIL share, queue depths and GPU
  busy, read from the other probes' last board (a few KB, hard-capped at 8 KiB);
- polls a request counter every ``poll_interval_s`` (one ``add(key, 0)``: a round trip that never waits on a
  missing key) and answers "dump your stacks" (every thread's Python stack, ``sys._current_frames`` with the
  collector held off) and "dump your Flight Recorder" (torch's own dump, without stack traces: ~1 ms for a few
  dozen entries, ~90 ms with its ring of 2000 full, most of it torch's dump, which holds the GIL), bounded at
  1 MiB and redacted like the board.

It never blocks training: every store call runs on this thread, which holds no lock of the program's and
releases the GIL while it waits on the socket. A failed call drops the connection and the next try waits
(2 s, doubling up to ``max_backoff_s``). A store whose server stops answering (a stopped agent) leaves a call
waiting without end (torch's client applies no timeout to a reply): the thread is then stuck, the board says
since when, and the program runs on. Nothing of the job's own keys is read or written, and the job's own
connection is never used (a slow call of ours would hold its lock). Without torch.distributed initialised the
thread only checks, once per poll, whether it is now.
"""

from __future__ import annotations

import datetime
import json
import os
import pickle
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

from dflash_contract import mailbox as mb
from dflash_contract.board import (
    STATUS_OK,
    CollectivesKeys,
    GilKeys,
    HealthKeys,
    MailboxKeys,
    PayloadKeys,
    ProbeName,
    QueueKeys,
    SessionKeys,
)
from dflash_contract.mailbox import AnswerKeys, EntryKeys, GroupKeys, QueueRowKeys, SummaryKeys, ThreadKeys
from dflash_contract.redact import redact_text
from probes._common import HookGuard, JsonDict, current_frames, loaded_module

STATE_WAITING = "waiting"  # torch.distributed not initialised yet (or not a TCPStore job)
STATE_CONNECTED = "connected"
STATE_BACKOFF = "backoff"  # the last call failed; the next try is due at BACKOFF_UNTIL
STATE_CLOSED = "closed"
_THREAD_NAME = "dflash-diag-mailbox"
_RESERVED_QUEUE_NAMES = frozenset({PayloadKeys.STATUS, PayloadKeys.REASON, PayloadKeys.ERRORS,
                                   PayloadKeys.HOOK_ERRORS, PayloadKeys.LAST_HOOK_ERROR})


@dataclass(frozen=True, kw_only=True)
class Config:
    post_interval_s: float = 2.0  # a summary this often
    poll_interval_s: float = 1.0  # the request counter this often
    connect_timeout_s: float = 5.0  # joining the store (torch's client retries within it)
    min_backoff_s: float = 2.0
    max_backoff_s: float = 60.0
    summary_threads: int = 16  # threads listed in a summary, busiest first (the whole stack dump lists all)
    # Flight Recorder entries in an answer, newest kept: every rank's answer goes through the store's one server
    # thread, and the last few hundred collectives are what a hang or a mismatch is read from (~230 KB).
    fr_entries: int = 500


class MailboxProbe:
    name = ProbeName.MAILBOX

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or Config()
        self._guard = HookGuard()
        self._stop = threading.Event()
        self._board: JsonDict | None = None  # the session's last document (replaced, never mutated)
        self._store: Any = None
        self._state = STATE_WAITING
        self._waiting_reason = "torch.distributed is not initialised in this process"
        self._address: tuple[str, int] | None = None
        self._rank: int | None = None
        self._world: int | None = None
        self._posts = 0
        self._connects = 0
        self._errors = 0
        self._last_error: str | None = None
        self._backoff_s = self.config.min_backoff_s
        self._retry_at = 0.0
        self._next_post = 0.0
        self._last_any: int | None = None
        self._answered: dict[str, int] = {}
        self._requests_answered = 0
        self._last_post_ms: float | None = None
        self._last_answer_ms: float | None = None
        self._summary_bytes = 0
        self._call_since: float | None = None  # monotonic start of the store call in flight
        self._redacted: dict[str, str] = {}
        self._thread: threading.Thread | None = None  # started once torch.distributed is initialised
        self._closed = False

    # --- the session's side -------------------------------------------------------------------------------

    def note_board(self, document: JsonDict) -> None:
        """The session's newest board document: the summary's readings come from it (a reference, read later)."""
        self._board = document

    def snapshot(self, now_s: float) -> JsonDict:
        self._maybe_start()
        since = self._call_since
        blocked_s = time.monotonic() - since if since is not None else 0.0
        return {
            PayloadKeys.STATUS: STATUS_OK,
            MailboxKeys.CONNECTION: self._state,
            MailboxKeys.WAITING_REASON: self._waiting_reason if self._state == STATE_WAITING else None,
            MailboxKeys.STORE: f"{self._address[0]}:{self._address[1]}" if self._address else None,
            MailboxKeys.RANK: self._rank,
            MailboxKeys.POSTS: self._posts,
            MailboxKeys.CONNECTS: self._connects,
            MailboxKeys.STORE_ERRORS: self._errors,
            MailboxKeys.LAST_STORE_ERROR: self._last_error,
            MailboxKeys.LAST_POST_MS: self._last_post_ms,
            MailboxKeys.SUMMARY_BYTES: self._summary_bytes,
            MailboxKeys.REQUESTS_ANSWERED: self._requests_answered,
            MailboxKeys.LAST_ANSWER_MS: self._last_answer_ms,
            # A call that takes this long is one the store's server never answered (it stopped).
            MailboxKeys.CALL_BLOCKED_S: round(blocked_s, 3) if blocked_s > 10.0 else None,
            PayloadKeys.HOOK_ERRORS: self._guard.errors,
            PayloadKeys.LAST_HOOK_ERROR: self._guard.last_error,
        }

    def close(self) -> None:
        """Stop the thread; it posts a last summary marked final on its way out (waited for at most 1 s)."""
        self._closed = True
        self._stop.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout=1.0)
        self._state = STATE_CLOSED

    # --- the thread ---------------------------------------------------------------------------------------

    def _maybe_start(self) -> None:
        """Start the thread once the program initialised torch.distributed (on the board thread's publish): a
        program that never does gets no thread."""
        if self._thread is not None or self._closed:
            return
        dist = loaded_module("torch.distributed")
        if dist is None or not _initialized(dist):
            return
        self._thread = threading.Thread(target=self._loop, name=_THREAD_NAME, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            try:
                self._tick()
            except Exception as exc:  # never into the program; a store error drops the connection
                self._failed(exc)
            if self._stop.wait(self._tick_s()):
                break
        try:
            if self._store is not None:
                self._post(final=True)
        except Exception:
            pass

    def _tick_s(self) -> float:
        return min(self.config.poll_interval_s, self.config.post_interval_s)

    def _tick(self) -> None:
        now = time.monotonic()
        if self._store is None:
            if now < self._retry_at or not self._connect():
                return
        if now >= self._next_post:
            self._next_post = now + self.config.post_interval_s
            self._post(final=False)
        self._poll_requests()

    def _failed(self, exc: BaseException) -> None:
        self._errors += 1
        self._last_error = redact_text(f"{type(exc).__name__}: {exc}")[:300]
        self._store = None
        self._state = STATE_BACKOFF
        self._retry_at = time.monotonic() + self._backoff_s
        self._backoff_s = min(self.config.max_backoff_s, 2 * self._backoff_s)

    def _call(self, fn: Any, *args: Any) -> Any:
        self._call_since = time.monotonic()
        try:
            return fn(*args)
        finally:
            self._call_since = None

    def _connect(self) -> bool:
        dist = loaded_module("torch.distributed")
        if dist is None or not _initialized(dist):
            self._waiting_reason = "torch.distributed is not initialised in this process"
            return False
        address = _store_address(dist)
        if address is None:
            self._waiting_reason = ("the job's store is not a TCPStore and MASTER_ADDR/MASTER_PORT are not set: "
                                    "no store to post to")
            return False
        self._address = address
        self._rank, self._world = int(dist.get_rank()), int(dist.get_world_size())
        # A connection of our own (the job's client serialises its calls on one lock): world_size None and
        # wait_for_workers False, so joining adds no key and waits for nobody.
        timeout = datetime.timedelta(seconds=self.config.connect_timeout_s)
        self._store = self._call(lambda: dist.TCPStore(address[0], address[1], is_master=False, timeout=timeout,
                                                       wait_for_workers=False))
        self._connects += 1
        self._state = STATE_CONNECTED
        self._backoff_s = self.config.min_backoff_s
        self._next_post = 0.0
        # Requests made before we joined are not ours to answer: start from the counters' values now.
        self._last_any = self._call(self._store.add, mb.REQUEST_ANY_KEY, 0)
        self._answered = {kind: self._call(self._store.add, mb.request_key(kind), 0) for kind in mb.REQUEST_KINDS}
        return True

    # --- the summary --------------------------------------------------------------------------------------

    def _post(self, *, final: bool) -> None:
        t0 = time.perf_counter()
        data = self._summary_bytes_of(self.summary(final=final))
        self._call(self._store.set, mb.summary_key(self._rank or 0), data)  # no reply is awaited
        self._posts += 1
        self._summary_bytes = len(data)
        self._last_post_ms = round(1e3 * (time.perf_counter() - t0), 3)

    def summary(self, *, final: bool = False) -> JsonDict:
        """This rank's summary (the posted document, before its bound)."""
        board = self._board or {}
        session = board.get("session") or {}
        probes = board.get("probes") or {}
        current, entered, completed, in_s = _collectives(probes.get(ProbeName.COLLECTIVES))
        groups, groups_na = _fr_groups()
        return {
            SummaryKeys.SCHEMA: mb.SUMMARY_SCHEMA,
            SummaryKeys.RANK: self._rank,
            SummaryKeys.WORLD_SIZE: self._world,
            SummaryKeys.LOCAL_RANK: _env_int("LOCAL_RANK"),
            SummaryKeys.NODE_RANK: _node_rank(),
            SummaryKeys.HOST: self._text(socket.gethostname()),
            SummaryKeys.PID: os.getpid(),
            SummaryKeys.POSTS: self._posts + 1,
            SummaryKeys.POSTED_WALL_S: time.time(),
            SummaryKeys.INTERVAL_S: self.config.post_interval_s,
            SummaryKeys.FINAL: final,
            SummaryKeys.STEP: _int_or_none(session.get(SessionKeys.STEP)),
            SummaryKeys.STEPS: _int_or_none(session.get(SessionKeys.STEPS)),
            SummaryKeys.LAST_STEP_WALL_S: _float_or_none(session.get(SessionKeys.LAST_STEP_WALL_S)),
            SummaryKeys.OPTIMIZER_STEPS: _optimizer_steps(probes.get(ProbeName.HEALTH)),
            SummaryKeys.COLL_ENTERED: entered,
            SummaryKeys.COLL_COMPLETED: completed,
            SummaryKeys.COLL_IN_S: in_s,
            SummaryKeys.COLL_CURRENT: current,
            SummaryKeys.GROUPS: groups,
            SummaryKeys.GROUPS_NA: groups_na,
            SummaryKeys.GIL_SHARE: _gil_share(probes.get(ProbeName.GIL)),
            SummaryKeys.GPU_BUSY_PCT: _gpu_busy_pct(),
            SummaryKeys.THREADS: self._thread_rows(probes.get(ProbeName.GIL)),
            SummaryKeys.QUEUES: self._queue_rows(probes.get(ProbeName.QUEUES)),
            SummaryKeys.REQUESTS_ANSWERED: self._requests_answered,
        }

    def _summary_bytes_of(self, summary: JsonDict) -> bytes:
        """The summary as JSON, under MAX_SUMMARY_BYTES: thread rows, then queues, then groups give way."""
        for key in (None, SummaryKeys.THREADS, SummaryKeys.QUEUES, SummaryKeys.GROUPS):
            if key is not None:
                summary[key] = summary[key][: len(summary[key]) // 2]
                while summary[key] and len(_dumps(summary)) > mb.MAX_SUMMARY_BYTES:
                    summary[key] = summary[key][:-1]
            data = _dumps(summary)
            if len(data) <= mb.MAX_SUMMARY_BYTES:
                return data
        summary[SummaryKeys.COLL_CURRENT] = None
        return _dumps(summary)[: mb.MAX_SUMMARY_BYTES]  # cannot happen with the bounds above; never over the cap

    def _text(self, text: str) -> str:
        """Redacted and bounded; the same strings recur every post, so their redaction is remembered."""
        hit = self._redacted.get(text)
        if hit is None:
            hit = redact_text(text)[: mb.MAX_TEXT_CHARS]
            if len(self._redacted) > 4096:
                self._redacted.clear()
            self._redacted[text] = hit
        return hit

    def _thread_rows(self, gil: Any) -> list[JsonDict]:
        cpu = {}
        if isinstance(gil, dict) and isinstance(gil.get(GilKeys.THREADS), dict):
            for row in gil[GilKeys.THREADS].values():
                if isinstance(row, dict) and isinstance(row.get(GilKeys.TID), int):
                    cpu[row[GilKeys.TID]] = _float_or_none(row.get(GilKeys.CPU_SHARE))
        frames = current_frames()
        rows = []
        for t in threading.enumerate()[: 4 * mb.MAX_THREADS]:
            frame = frames.get(t.ident) if t.ident is not None else None
            where = None
            if frame is not None:
                code = frame.f_code
                where = self._text(f"{code.co_name} ({os.path.basename(code.co_filename)}:{frame.f_lineno})")
            rows.append({ThreadKeys.NAME: self._text(t.name), ThreadKeys.TID: t.native_id,
                         ThreadKeys.CPU_SHARE: cpu.get(t.native_id), ThreadKeys.WHERE: where})
        del frames
        rows.sort(key=lambda r: -(r[ThreadKeys.CPU_SHARE] or 0.0))
        return rows[: self.config.summary_threads]

    def _queue_rows(self, queues: Any) -> list[JsonDict]:
        if not isinstance(queues, dict):
            return []
        rows = []
        for name, row in queues.items():
            if name in _RESERVED_QUEUE_NAMES or not isinstance(row, dict):
                continue
            rows.append({QueueRowKeys.NAME: self._text(str(name)), QueueRowKeys.DEPTH: _int_or_none(row.get(QueueKeys.DEPTH)),
                         QueueRowKeys.MAXSIZE: _int_or_none(row.get(QueueKeys.MAXSIZE))})
        return rows[: mb.MAX_QUEUES]

    # --- requests -----------------------------------------------------------------------------------------

    def _poll_requests(self) -> None:
        store = self._store
        seen = self._call(store.add, mb.REQUEST_ANY_KEY, 0)
        if seen == self._last_any:
            return
        self._last_any = seen
        for kind in mb.REQUEST_KINDS:
            wanted = self._call(store.add, mb.request_key(kind), 0)
            if wanted > self._answered.get(kind, 0):
                self._answer(kind, wanted)
                self._answered[kind] = wanted

    def _answer(self, kind: str, request_id: int) -> None:
        t0 = time.perf_counter()
        body = self.stacks() if kind == mb.KIND_STACKS else flight_recorder(self._text, self.config.fr_entries)
        answer = {AnswerKeys.SCHEMA: mb.ANSWER_SCHEMA, AnswerKeys.KIND: kind, AnswerKeys.RANK: self._rank,
                  AnswerKeys.REQUEST_ID: request_id, AnswerKeys.ANSWERED_WALL_S: time.time(), **body}
        answer[AnswerKeys.COST_MS] = round(1e3 * (time.perf_counter() - t0), 3)
        data = _bounded_answer(answer)
        self._call(self._store.set, mb.answer_key(kind, self._rank or 0), data)
        self._call(self._store.set, mb.answered_key(kind, self._rank or 0), str(request_id).encode())
        self._requests_answered += 1
        self._last_answer_ms = round(1e3 * (time.perf_counter() - t0), 3)

    def stacks(self) -> JsonDict:
        """Every thread's Python stack, innermost frame first, as the answer's body."""
        frames = current_frames()
        try:
            by_ident = {t.ident: t for t in threading.enumerate()}
            rows = []
            for ident, frame in list(frames.items())[: mb.MAX_THREADS]:
                t = by_ident.get(ident)
                stack: list[list[Any]] = []
                f = frame
                while f is not None and len(stack) < mb.MAX_FRAMES:
                    code = f.f_code
                    stack.append([self._text(code.co_name), self._text(code.co_filename), f.f_lineno])
                    f = f.f_back
                rows.append({ThreadKeys.NAME: self._text(t.name if t is not None else f"thread-{ident}"),
                             ThreadKeys.TID: t.native_id if t is not None else None,
                             ThreadKeys.DAEMON: t.daemon if t is not None else None,
                             ThreadKeys.FRAMES: stack, ThreadKeys.FRAMES_TRUNCATED: f is not None})
            return {AnswerKeys.NA: None, AnswerKeys.TRUNCATED: len(frames) > mb.MAX_THREADS, AnswerKeys.THREADS: rows}
        finally:
            del frames


# --- torch's own readings, through sys.modules only -------------------------------------------------------


def _initialized(dist: Any) -> bool:
    try:
        return bool(dist.is_available() and dist.is_initialized())
    except Exception:
        return False


def _store_address(dist: Any) -> tuple[str, int] | None:
    """The job's TCPStore: the default group's store (under its PrefixStores), else MASTER_ADDR/MASTER_PORT."""
    try:
        store = dist.distributed_c10d._get_default_store()
        for _ in range(8):
            if not isinstance(store, dist.PrefixStore):
                break
            store = store.underlying_store
        if isinstance(store, dist.TCPStore):
            return str(store.host), int(store.port)
    except Exception:
        pass
    host, port = os.environ.get("MASTER_ADDR"), _env_int("MASTER_PORT")
    if host and port is not None and 0 < port < 65536:
        return host, port
    return None


def _fr_module() -> Any:
    torch = loaded_module("torch")
    c10d = getattr(getattr(torch, "_C", None), "_distributed_c10d", None) if torch is not None else None
    return c10d


def _fr_dumps(include_entries: bool) -> list[dict[str, Any]]:
    """torch's Flight Recorder dumps of this process, unpickled (torch's own bytes, made in this process): the
    generic recorder (gloo and others) and, in CUDA builds, NCCL's. Without stack traces: the first dump with
    them symbolises every frame (seconds)."""
    c10d = _fr_module()
    out = []
    for name in ("_dump_fr_trace", "_dump_nccl_trace"):
        fn = getattr(c10d, name, None)
        if fn is None:
            continue
        dump = pickle.loads(fn(include_entries, False, False))
        if isinstance(dump, dict):
            out.append(dump)
    return out


def _fr_groups() -> tuple[list[JsonDict], str | None]:
    """Per process group: the last collective enqueued, started and completed (torch's pg_status)."""
    try:
        dumps = _fr_dumps(False)
    except Exception as exc:
        return [], f"torch's Flight Recorder dump failed: {type(exc).__name__}"[:200]
    if not dumps:
        return [], "this torch has no Flight Recorder (torch._C._distributed_c10d._dump_fr_trace)"
    rows: dict[str, JsonDict] = {}
    for dump in dumps:
        for row in _group_rows(dump):
            rows.setdefault(row[GroupKeys.PG_ID], row)
    return list(rows.values())[: mb.MAX_GROUPS], None


def _group_rows(dump: dict[str, Any]) -> list[JsonDict]:
    config = dump.get("pg_config") or {}
    status = dump.get("pg_status") or {}
    rows = []
    for pg_id, st in list(status.items())[: mb.MAX_GROUPS]:
        if not isinstance(st, dict):
            continue
        # pg_config is keyed by the group's name, pg_status by its uid: the same string when torch names groups by
        # their uid (NCCL); gloo's default group has an empty name. One config and one status are the same group.
        cfg = config.get(str(pg_id)) or (next(iter(config.values())) if len(config) == 1 and len(status) == 1 else None)
        cfg = cfg if isinstance(cfg, dict) else {}
        rows.append({
            GroupKeys.PG_ID: str(pg_id)[:64],
            GroupKeys.NAME: str(cfg.get("name", ""))[:64] if cfg else None,
            GroupKeys.DESC: redact_text(str(cfg.get("desc", "")))[:64] if cfg else None,
            GroupKeys.RANKS: _rank_list(cfg.get("ranks")) if cfg else None,
            GroupKeys.LAST_ENQUEUED: _int_or_none(st.get("last_enqueued_collective")),
            GroupKeys.LAST_STARTED: _int_or_none(st.get("last_started_collective")),
            GroupKeys.LAST_COMPLETED: _int_or_none(st.get("last_completed_collective")),
        })
    return rows


def _rank_list(value: Any) -> list[int] | None:
    """torch writes a group's ranks as the text of a list ("[0, 1]"); read as integers only, bounded."""
    if isinstance(value, list):
        items = value
    elif isinstance(value, str) and len(value) < 200_000:
        try:
            items = json.loads(value)
        except ValueError:
            return None
    else:
        return None
    if not isinstance(items, list) or not all(type(r) is int and 0 <= r < mb.MAX_RANKS for r in items):
        return None
    return items[:4096]


def flight_recorder(text: Any = redact_text, max_entries: int = mb.MAX_FR_ENTRIES) -> JsonDict:
    """This process's Flight Recorder as an answer's body: groups and its newest ``max_entries`` entries (oldest
    first), no frames."""
    max_entries = max(1, min(max_entries, mb.MAX_FR_ENTRIES))
    t_ns = time.time_ns()
    try:
        dumps = _fr_dumps(True)
    except Exception as exc:
        return {AnswerKeys.NA: f"torch's Flight Recorder dump failed: {type(exc).__name__}: {exc}"[:300]}
    if not dumps:
        return {AnswerKeys.NA: "this torch has no Flight Recorder (torch._C._distributed_c10d._dump_fr_trace)"}
    groups: dict[str, JsonDict] = {}
    entries: list[JsonDict] = []
    total = 0
    for dump in dumps:
        for row in _group_rows(dump):
            groups.setdefault(row[GroupKeys.PG_ID], row)
        raw = dump.get("entries") or []
        total += len(raw)
        entries.extend(_entry(e, text) for e in raw[-max_entries:] if isinstance(e, dict))
    version = next((str(d.get("version"))[:16] for d in dumps if d.get("version") is not None), None)
    return {AnswerKeys.NA: None, AnswerKeys.FR_VERSION: version, AnswerKeys.DUMP_WALL_NS: t_ns,
            AnswerKeys.GROUPS: list(groups.values())[: mb.MAX_GROUPS], AnswerKeys.ENTRIES: entries[-max_entries:],
            AnswerKeys.ENTRIES_TOTAL: total, AnswerKeys.TRUNCATED: total > max_entries}


def _entry(e: dict[str, Any], text: Any) -> JsonDict:
    pg = e.get("process_group")
    name, desc = (pg[0], pg[1]) if isinstance(pg, (list, tuple)) and len(pg) == 2 else ("", "")
    return {
        EntryKeys.RECORD_ID: _int_or_none(e.get("record_id")),
        EntryKeys.PG_ID: _int_or_none(e.get("pg_id")),
        EntryKeys.PG_NAME: str(name)[:64],
        EntryKeys.PG_DESC: text(str(desc))[:64],
        EntryKeys.COLLECTIVE_SEQ_ID: _int_or_none(e.get("collective_seq_id")),
        EntryKeys.P2P_SEQ_ID: _int_or_none(e.get("p2p_seq_id")),
        EntryKeys.OP_ID: _int_or_none(e.get("op_id")),
        EntryKeys.IS_P2P: bool(e.get("is_p2p")),
        EntryKeys.PROFILING_NAME: text(str(e.get("profiling_name", "")))[:80],
        EntryKeys.INPUT_SIZES: _sizes(e.get("input_sizes")),
        EntryKeys.INPUT_DTYPES: [str(d)[:24] for d in (e.get("input_dtypes") or [])[:64]],
        EntryKeys.OUTPUT_SIZES: _sizes(e.get("output_sizes")),
        EntryKeys.OUTPUT_DTYPES: [str(d)[:24] for d in (e.get("output_dtypes") or [])[:64]],
        EntryKeys.STATE: str(e.get("state", ""))[:16],
        EntryKeys.RETIRED: bool(e.get("retired")),
        EntryKeys.TIME_CREATED_NS: _int_or_none(e.get("time_created_ns")),
        EntryKeys.TIME_STARTED_NS: _int_or_none(e.get("time_discovered_started_ns")),
        EntryKeys.TIME_COMPLETED_NS: _int_or_none(e.get("time_discovered_completed_ns")),
        EntryKeys.TIMEOUT_MS: _int_or_none(e.get("timeout_ms")),
        EntryKeys.THREAD_NAME: text(str(e.get("thread_name", "")))[:80],
    }


def _sizes(value: Any) -> list[list[int]]:
    if not isinstance(value, (list, tuple)):
        return []
    return [[int(d) for d in s[:16] if isinstance(d, int)] for s in value[:64] if isinstance(s, (list, tuple))]


def _bounded_answer(answer: JsonDict) -> bytes:
    """The answer as JSON, under MAX_ANSWER_BYTES: the oldest entries or the deepest frames give way first."""
    data = _dumps(answer)
    entries = answer.get(AnswerKeys.ENTRIES)
    while len(data) > mb.MAX_ANSWER_BYTES and entries:
        del entries[: max(1, len(entries) // 4)]
        answer[AnswerKeys.TRUNCATED] = True
        data = _dumps(answer)
    threads = answer.get(AnswerKeys.THREADS)
    depth = mb.MAX_FRAMES
    while len(data) > mb.MAX_ANSWER_BYTES and threads and depth > 1:
        depth //= 2
        for row in threads:
            if len(row[ThreadKeys.FRAMES]) > depth:
                row[ThreadKeys.FRAMES] = row[ThreadKeys.FRAMES][:depth]
                row[ThreadKeys.FRAMES_TRUNCATED] = True
        answer[AnswerKeys.TRUNCATED] = True
        data = _dumps(answer)
    if len(data) > mb.MAX_ANSWER_BYTES:
        for key in (AnswerKeys.ENTRIES, AnswerKeys.THREADS):
            if key in answer:
                answer[key] = []
        answer[AnswerKeys.TRUNCATED] = True
        data = _dumps(answer)
    return data


# --- the other probes' readings, from the board ---------------------------------------------------------


def _collectives(payload: Any) -> tuple[JsonDict | None, int | None, int | None, float | None]:
    if not isinstance(payload, dict) or payload.get(PayloadKeys.STATUS) != STATUS_OK:
        return None, None, None, None
    current = [c for c in payload.get(CollectivesKeys.CURRENT) or [] if isinstance(c, dict)]
    oldest = min(current, key=lambda c: c.get(CollectivesKeys.SEQ) or 0) if current else None
    row = None if oldest is None else {
        SummaryKeys.SEQ: _int_or_none(oldest.get(CollectivesKeys.SEQ)),
        SummaryKeys.OP: str(oldest.get(CollectivesKeys.OP))[:40],
        SummaryKeys.THREAD: redact_text(str(oldest.get(CollectivesKeys.THREAD)))[:80],
        SummaryKeys.SINCE_WALL_S: _float_or_none(oldest.get(CollectivesKeys.SINCE_WALL_S)),
    }
    return (row, _int_or_none(payload.get(CollectivesKeys.ENTERED)), _int_or_none(payload.get(CollectivesKeys.COMPLETED)),
            _float_or_none(payload.get(CollectivesKeys.IN_COLLECTIVES_S)))


def _optimizer_steps(payload: Any) -> int | None:
    if not isinstance(payload, dict) or payload.get(PayloadKeys.STATUS) != STATUS_OK:
        return None
    return _int_or_none(payload.get(HealthKeys.STEPS))


def _gil_share(payload: Any) -> float | None:
    if not isinstance(payload, dict) or payload.get(PayloadKeys.STATUS) != STATUS_OK:
        return None
    return _float_or_none(payload.get(GilKeys.CONTENTION_SHARE))


def _gpu_busy_pct() -> float | None:
    """NVML's utilization of this rank's GPU, only when the program already uses CUDA (never initialises it):
    the one device it sees, else the device numbered LOCAL_RANK (the common layout; another thread's current
    device is not readable from here)."""
    cuda = loaded_module("torch.cuda")
    try:
        if cuda is None or not cuda.is_initialized():
            return None
        count = int(cuda.device_count())
        index = 0 if count == 1 else _env_int("LOCAL_RANK")
        if index is None or not 0 <= index < count:
            return None
        return float(cuda.utilization(index))
    except Exception:
        return None  # no pynvml, or NVML refused: the summary says nothing rather than a guess


def _node_rank() -> int | None:
    for name in ("GROUP_RANK", "NODE_RANK", "SLURM_NODEID"):
        value = _env_int(name)
        if value is not None:
            return value
    return None


def _env_int(name: str) -> int | None:
    text = os.environ.get(name, "")
    return int(text) if text.isdigit() and len(text) < 10 else None


def _int_or_none(value: Any) -> int | None:
    return value if type(value) is int else None


def _float_or_none(value: Any) -> float | None:
    if type(value) is int:
        return float(value)
    return value if type(value) is float and value == value and abs(value) != float("inf") else None


def _dumps(value: Any) -> bytes:
    return json.dumps(value, allow_nan=False, separators=(",", ":")).encode()


# What the probe registry (``probes/registry.py``) reads of this module: its board name, its Config, its class.
NAME = ProbeName.MAILBOX
PROBE = MailboxProbe
