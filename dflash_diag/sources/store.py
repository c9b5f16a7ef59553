"""A job's own c10d store, joined as one more client, to read the mailbox the ranks' probes post to
(dflash_contract.mailbox, docs/mailbox.md).

Where the store is comes from a rank's environment (``MASTER_ADDR``, ``MASTER_PORT``, ``WORLD_SIZE``), read from
/proc like the rest: the PID given, or the first process below it (a launcher's rank) that has them. The client
is torch's own (``torch.distributed.TCPStore(is_master=False)``, no key added, nobody waited for), imported only
here and only when used: where torch is not importable in dflash-diag's environment every read is
``NA("...")``.

torch's client waits without end for a reply the server never sends (a stopped server), so every store call runs
on a helper thread and is given ``call_timeout_s``; a call past it marks this client broken (its connection may
be mid-reply) and every later read is NA. Reads never block on a missing key: which keys exist is asked with
``check`` first. Everything read is validated and bounded by ``sources.mailbox``.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dflash_contract import mailbox as mb
from dflash_diag.model.common import NA, Maybe
from dflash_diag.model.mailbox import FrGathered, MailboxRead, MailboxWindow, StacksGathered, StoreAddress
from dflash_diag.sources import procfs
from dflash_diag.sources.mailbox import (
    MailboxFormatError,
    parse_flight_recorder,
    parse_stacks,
    parse_summary,
)

# What one multi_get may bring back: far below the store's 8 MiB message limit.
MAX_BATCH_BYTES = 2 * 1024 * 1024
MAX_SEARCHED = 256  # processes looked at below the PID given for one with the store's address
_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.\-_:%\[\]]{0,253}$")

# (host, port, timeout_s) -> a store client: check(keys), multi_get(keys), add(key, n), set(key, bytes).
Connect = Callable[[str, int, float], Any]


@dataclass(frozen=True, kw_only=True)
class StoreConfig:
    connect_timeout_s: float = 3.0  # joining (torch's client retries within it)
    call_timeout_s: float = 3.0  # one store call; past it the client is broken
    poll_s: float = 0.2  # between two looks for answers
    deadline_s: float = 6.0  # gathering answers: ranks poll every second, a dump costs tens of ms


def _small_int(text: str | None, low: int, high: int) -> int | None:
    if text is None or not text.isdigit() or len(text) > 9:
        return None
    value = int(text)
    return value if low <= value <= high else None


def address_from_environ(env: Mapping[str, str], pid: int) -> StoreAddress | None:
    """The store a process's environment names, None when it names none (or nothing we would connect to)."""
    host = env.get("MASTER_ADDR", "")
    port = _small_int(env.get("MASTER_PORT"), 1, 65535)
    world = _small_int(env.get("WORLD_SIZE"), 1, mb.MAX_RANKS)
    if not _HOST.match(host) or port is None or world is None:
        return None
    return StoreAddress(host=host, port=port, world_size=world, from_pid=pid)


def store_address(pid: int, *, environ: Callable[[int], Maybe[dict[str, str]]] = procfs.read_environ,
                  children: Callable[[int], tuple[int, ...]] = procfs.all_children) -> Maybe[StoreAddress]:
    """The job's store, from ``pid``'s environment or, for a launcher (torchrun, a shell script, ``dflash-diag run``
    in front), from the first process below it that has one (three levels down at most)."""
    level, seen, why = [pid], 0, None
    for _ in range(4):
        below: list[int] = []
        for p in level:
            seen += 1
            try:
                env = environ(p)
            except Exception:  # gone meanwhile (sources.procfs raises AttachError for a vanished PID)
                continue
            if isinstance(env, NA):
                why = why or env.reason
                continue
            address = address_from_environ(env, p)
            if address is not None:
                return address
            if seen < MAX_SEARCHED:
                below.extend(children(p))
        level = below[: MAX_SEARCHED]
        if not level:
            break
    return NA(why or f"no process at or below PID {pid} has MASTER_ADDR, MASTER_PORT and WORLD_SIZE in its "
                     "environment: not a torch.distributed job started with env:// (torchrun, srun, mpirun)")


def torch_connect(host: str, port: int, timeout_s: float) -> Any:
    """torch's own client of the job's store: adds no key (world_size None), waits for no worker."""
    import datetime

    import torch.distributed as dist  # only here: the tool imports torch when it reads a mailbox, never else

    return dist.TCPStore(host, port, is_master=False, timeout=datetime.timedelta(seconds=timeout_s),
                         wait_for_workers=False)


class StoreCallError(Exception):
    """A store call failed or did not return in time (the message says which)."""


class Mailbox:
    """One client of a job's store, reading the mailbox. Every method returns a value or an ``NA``."""

    def __init__(self, address: StoreAddress, store: Any, config: StoreConfig, *,
                 clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep) -> None:
        self.address = address
        self._store = store
        self.config = config
        self._clock = clock
        self._sleep = sleep
        self._broken: str | None = None
        self.calls = 0  # store round trips made

    @classmethod
    def open(cls, address: StoreAddress, config: StoreConfig | None = None, *, connect: Connect | None = None,
             clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep) -> Maybe[Mailbox]:
        config = config or StoreConfig()
        if connect is None:
            try:
                import torch.distributed as dist  # noqa: F401  (is it there at all?)
            except Exception as exc:  # ImportError, or a broken install's own error
                return NA(f"torch is not importable in dflash-diag's environment ({type(exc).__name__}): "
                          "install torch beside dflash-diag to read the job's store")
            connect = torch_connect
        box = cls(address, None, config, clock=clock, sleep=sleep)
        try:
            box._store = box._call(connect, address.host, address.port, config.connect_timeout_s,
                                   timeout_s=config.connect_timeout_s + config.call_timeout_s)
        except StoreCallError as exc:
            return NA(f"cannot join the job's store at {address.label}: {exc}")
        return box

    # --- store calls, each with a deadline ------------------------------------------------------------------

    def _call(self, fn: Callable[..., Any], *args: Any, timeout_s: float | None = None) -> Any:
        if self._broken is not None:
            raise StoreCallError(self._broken)
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["value"] = fn(*args)
            except BaseException as exc:  # handed back to the caller's thread as a value
                box["error"] = exc

        limit_s = self.config.call_timeout_s if timeout_s is None else timeout_s
        t = threading.Thread(target=run, name="dflash-diag-store-call", daemon=True)
        self.calls += 1
        t.start()
        t.join(limit_s)
        if t.is_alive():
            # The reply may still come: this connection cannot be trusted to pair the next reply with its call.
            self._broken = f"the store at {self.address.label} did not answer within {limit_s:g} s"
            raise StoreCallError(self._broken)
        if "error" in box:
            exc = box["error"]
            raise StoreCallError(f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}")
        return box["value"]

    def _existing(self, keys: Sequence[str]) -> list[str]:
        """The keys that exist (``check`` is all-or-nothing: one call when all do, then one per key)."""
        if not keys:
            return []
        if self._call(self._store.check, list(keys)):
            return list(keys)
        return [k for k in keys if self._call(self._store.check, [k])]

    def _multi_get(self, keys: Sequence[str], value_limit: int) -> list[bytes]:
        """Values of existing keys, in as few multi_gets as keep each reply under MAX_BATCH_BYTES."""
        per = max(1, MAX_BATCH_BYTES // value_limit)
        out: list[bytes] = []
        for i in range(0, len(keys), per):
            values = self._call(self._store.multi_get, list(keys[i:i + per]))
            out.extend(bytes(v) for v in values)
        return out

    # --- the summaries --------------------------------------------------------------------------------------

    def read_summaries(self) -> Maybe[MailboxRead]:
        """Every rank's last summary: one check and one multi_get when every rank posted (up to 256 ranks)."""
        t0, calls0 = time.perf_counter(), self.calls
        ranks = range(self.address.world_size)
        try:
            keys = self._existing([mb.summary_key(r) for r in ranks])
            values = self._multi_get(keys, mb.MAX_SUMMARY_BYTES)
        except StoreCallError as exc:
            return NA(f"reading the mailbox at {self.address.label}: {exc}")
        now = self._clock()
        posts, invalid = [], []
        for key, value in zip(keys, values, strict=True):
            rank = int(key.rsplit("/", 1)[1])
            try:
                posts.append(parse_summary(value, rank=rank, read_wall_s=now))
            except MailboxFormatError as exc:
                invalid.append((rank, str(exc)))
        present = {int(k.rsplit("/", 1)[1]) for k in keys}
        return MailboxRead(address=self.address, read_wall_s=now, elapsed_ms=1e3 * (time.perf_counter() - t0),
                           posts=tuple(sorted(posts, key=lambda p: p.rank)),
                           silent_ranks=tuple(r for r in ranks if r not in present), invalid=tuple(invalid),
                           round_trips=self.calls - calls0)

    # --- requests and answers -------------------------------------------------------------------------------

    def post_request(self, kind: str) -> Maybe[int]:
        """Ask every rank for ``kind`` (mb.KIND_STACKS, mb.KIND_FLIGHTREC); the request's id."""
        try:
            request_id = int(self._call(self._store.add, mb.request_key(kind), 1))
            self._call(self._store.add, mb.REQUEST_ANY_KEY, 1)
        except StoreCallError as exc:
            return NA(f"posting a request to the mailbox at {self.address.label}: {exc}")
        return request_id

    def gather_raw(self, kind: str, *, deadline_s: float | None = None,
                   ranks: Iterable[int] | None = None) -> Maybe[RawAnswers]:
        """Post a request of ``kind`` and collect each rank's answer bytes (to it or a later request) until every
        rank answered or the deadline passed. The bytes are unchecked: parse them with ``sources.mailbox``."""
        got = self.gather_raw_many({kind: ranks}, deadline_s=deadline_s)
        return got if isinstance(got, NA) else got[kind]

    def gather_raw_many(self, asks: Mapping[str, Iterable[int] | None], *,
                        deadline_s: float | None = None) -> Maybe[dict[str, RawAnswers]]:
        """Several requests posted together and gathered in one polling loop: the ranks answer them on the same
        look at the mailbox, so asking for stacks and a Flight Recorder costs one wait, not two (a rank that
        answers nothing holds the loop until the deadline once)."""
        t0 = time.perf_counter()
        ids: dict[str, int] = {}
        for kind in asks:
            request_id = self.post_request(kind)
            if isinstance(request_id, NA):
                return request_id
            ids[kind] = request_id
        pending = {kind: sorted(set(range(self.address.world_size) if ranks is None else ranks))
                   for kind, ranks in asks.items()}
        got: dict[str, dict[int, bytes]] = {kind: {} for kind in asks}
        end = time.monotonic() + (self.config.deadline_s if deadline_s is None else deadline_s)
        try:
            while any(pending.values()):
                for kind, waiting in pending.items():
                    if not waiting:
                        continue
                    ready = self._answered(kind, waiting, ids[kind])
                    keys = [mb.answer_key(kind, r) for r in ready]
                    for rank, value in zip(ready, self._multi_get(keys, mb.MAX_ANSWER_BYTES), strict=True):
                        waiting.remove(rank)
                        got[kind][rank] = value
                if not any(pending.values()) or time.monotonic() >= end:
                    break
                self._sleep(self.config.poll_s)
        except StoreCallError as exc:
            return NA(f"gathering {', '.join(asks)} from the mailbox at {self.address.label}: {exc}")
        elapsed_ms = 1e3 * (time.perf_counter() - t0)
        return {kind: RawAnswers(kind=kind, request_id=ids[kind], answers=got[kind],
                                 silent_ranks=tuple(pending[kind]), elapsed_ms=elapsed_ms) for kind in asks}

    def _answered(self, kind: str, pending: Sequence[int], request_id: int) -> list[int]:
        """The pending ranks whose answer is to ``request_id`` or a later request (their pointers, a few bytes)."""
        keys = self._existing([mb.answered_key(kind, r) for r in pending])
        ready = []
        for key, value in zip(keys, self._multi_get(keys, 32), strict=True):
            text = bytes(value)[:20].decode("ascii", errors="replace")
            if text.isdigit() and int(text) >= request_id:
                ready.append(int(key.rsplit("/", 1)[1]))
        return ready

    def gather_stacks(self, *, deadline_s: float | None = None,
                      ranks: Iterable[int] | None = None) -> Maybe[StacksGathered]:
        """Ask every rank (or ``ranks``) for its threads' Python stacks; what came by the deadline."""
        raw = self.gather_raw(mb.KIND_STACKS, deadline_s=deadline_s, ranks=ranks)
        if isinstance(raw, NA):
            return raw
        answers, invalid = _parsed(raw, lambda data, rank: parse_stacks(data, rank=rank))
        return StacksGathered(request_id=raw.request_id, elapsed_ms=raw.elapsed_ms, answers=tuple(answers),
                              silent_ranks=raw.silent_ranks, invalid=invalid)

    def gather_flight_recorder(self, *, deadline_s: float | None = None,
                               ranks: Iterable[int] | None = None) -> Maybe[FrGathered]:
        """Ask every rank (or ``ranks``) for torch's Flight Recorder dump; what came by the deadline."""
        raw = self.gather_raw(mb.KIND_FLIGHTREC, deadline_s=deadline_s, ranks=ranks)
        if isinstance(raw, NA):
            return raw
        dumps, invalid = _parsed(raw, lambda data, rank: parse_flight_recorder(data, rank=rank))
        return FrGathered(request_id=raw.request_id, elapsed_ms=raw.elapsed_ms, dumps=tuple(dumps),
                          silent_ranks=raw.silent_ranks, invalid=invalid)


    def gather_window_end(self, *, stacks_of: Iterable[int] | None, deadline_s: float | None = None
                          ) -> tuple[Maybe[FrGathered], Maybe[StacksGathered]]:
        """Every rank's Flight Recorder and the stacks of ``stacks_of`` (None: every rank), asked together."""
        raw = self.gather_raw_many({mb.KIND_FLIGHTREC: None, mb.KIND_STACKS: stacks_of}, deadline_s=deadline_s)
        if isinstance(raw, NA):
            return raw, raw
        dumps, fr_invalid = _parsed(raw[mb.KIND_FLIGHTREC], lambda data, rank: parse_flight_recorder(data, rank=rank))
        answers, st_invalid = _parsed(raw[mb.KIND_STACKS], lambda data, rank: parse_stacks(data, rank=rank))
        fr, st = raw[mb.KIND_FLIGHTREC], raw[mb.KIND_STACKS]
        return (FrGathered(request_id=fr.request_id, elapsed_ms=fr.elapsed_ms, dumps=tuple(dumps),
                           silent_ranks=fr.silent_ranks, invalid=fr_invalid),
                StacksGathered(request_id=st.request_id, elapsed_ms=st.elapsed_ms, answers=tuple(answers),
                               silent_ranks=st.silent_ranks, invalid=st_invalid))


@dataclass(frozen=True)
class RawAnswers:
    """The answer bytes ranks gave to one request (unchecked)."""

    kind: str
    request_id: int
    answers: Mapping[int, bytes]  # rank -> the answer as written
    silent_ranks: tuple[int, ...]  # no answer by the deadline
    elapsed_ms: float


def _parsed(raw: RawAnswers, parse: Callable[[bytes, int], Any]) -> tuple[list[Any], tuple[tuple[int, str], ...]]:
    out, invalid = [], []
    for rank, data in sorted(raw.answers.items()):
        try:
            out.append(parse(data, rank))
        except MailboxFormatError as exc:
            invalid.append((rank, str(exc)))
    return out, tuple(invalid)


def open_mailbox(pid: int, config: StoreConfig | None = None, *, connect: Connect | None = None,
                 environ: Callable[[int], Maybe[dict[str, str]]] = procfs.read_environ,
                 children: Callable[[int], tuple[int, ...]] = procfs.all_children) -> Maybe[Mailbox]:
    """The mailbox of the job ``pid`` belongs to (a rank, or a launcher of ranks on this node)."""
    address = store_address(pid, environ=environ, children=children)
    if isinstance(address, NA):
        return address
    return Mailbox.open(address, config, connect=connect)


STACKS_GATHERED = 16  # ranks whose stacks one window asks for, at most (every rank of a job up to this size)


def _reason(value: Any) -> Any:
    return value.reason if isinstance(value, NA) else value


def _stacks_of(last: Maybe[MailboxRead], world_size: int) -> list[int] | None:
    """Every rank in a small job; in a large one the ranks worth a look: silent, or not in a collective now (the
    ranks the others wait for are outside the collective they wait in)."""
    if world_size <= STACKS_GATHERED:
        return None
    if isinstance(last, NA):
        return list(range(STACKS_GATHERED))
    posted = {p.rank: p for p in last.posts}
    odd = [r for r in range(world_size) if r not in posted or posted[r].coll_current is None or posted[r].stale]
    return odd[:STACKS_GATHERED]


class MailboxWatch:
    """One observation window's reading of a job's mailbox: every summary at ``begin()`` and at ``end()``, and
    at the end every rank's Flight Recorder with the stacks of the ranks worth a look, asked together (the ranks
    look for requests every second: one gathering costs about a second, ``deadline_s`` when a rank is gone).

    The end's summaries are read after the gathering, and at least one posting interval (and a half second) after
    the first read, ``max_wait_s`` at most: two reads of one post say nothing of the time between."""

    def __init__(self, box: Mailbox, *, deadline_s: float = 2.5, max_wait_s: float = 3.0,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> None:
        self._box = box
        self._deadline_s = deadline_s
        self._max_wait_s = max_wait_s
        self._sleep = sleep
        self._clock = clock
        self._first: Maybe[MailboxRead] = NA("the window's first read was not taken")
        self._begun_s = clock()

    def begin(self) -> None:
        self._begun_s = self._clock()
        self._first = self._box.read_summaries()

    def end(self) -> MailboxWindow:
        first = self._first
        stacks_of = _stacks_of(first, self._box.address.world_size)
        fr, stacks = self._box.gather_window_end(stacks_of=stacks_of, deadline_s=self._deadline_s)
        interval_s = max((p.interval_s for p in first.posts), default=0.0) if isinstance(first, MailboxRead) else 0.0
        wait_s = min(self._max_wait_s, interval_s + 0.5 - (self._clock() - self._begun_s))
        if wait_s > 0:
            self._sleep(wait_s)
        last = self._box.read_summaries()
        return MailboxWindow(address=self._box.address, first=_reason(first), last=_reason(last),
                             flight_recorder=_reason(fr), stacks=_reason(stacks))
